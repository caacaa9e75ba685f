-- Project secrets, AES-256-GCM at rest with a key that lives outside the database (self-host config).
create table project_secrets (
  project_id uuid not null references projects(id) on delete cascade,
  name text not null check (name ~ '^[A-Za-z_][A-Za-z0-9_]*$' and upper(name) not like 'SVC\_%'),
  value_enc text not null,
  updated_at timestamptz not null default now(),
  primary key (project_id, name)
);
-- Bumped on every secret write: sandboxes see it as SVC_PROJECT_SECRETS_REVISION.
alter table projects add column secrets_revision integer not null default 0;
