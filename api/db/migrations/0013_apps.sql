-- Deploys of the manifest's [[apps]] (the definitions live in svc.toml on the default branch): one row per attempt.
create table app_deploys (
  id uuid primary key,
  project_id uuid not null references projects(id) on delete cascade,
  app text not null,
  revision text not null,
  -- The app's build inputs' hash at `revision`, and the default branch's key when the deploy started (the
  -- deployer redeploys when the tip's key differs from the newest attempt's `tip_key`).
  key text not null,
  tip_key text not null,
  -- The manifest entry deployed (defaults applied): a rollback runs it again as it was.
  spec jsonb not null,
  image text,
  status text not null check (status in ('building', 'starting', 'live', 'failed', 'superseded', 'stopped')),
  trigger text not null,
  rollback_of uuid,
  container_id text,
  endpoint text,
  error text,
  -- The API process running the deploy: one that died leaves it to the reconciler.
  instance_id text,
  started_at timestamptz not null default clock_timestamp(),
  finished_at timestamptz
);

create index app_deploys_app_idx on app_deploys(project_id, app, started_at desc);
create index app_deploys_active_idx on app_deploys(status) where status in ('building', 'starting', 'live');
