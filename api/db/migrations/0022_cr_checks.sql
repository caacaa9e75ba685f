-- A CR's checks: one run per (check, head, base), of the commit the merge would create. The leader's check
-- scheduler (api/checks/) queues them when a head or base moves and runs each in a sandbox of its own.
create table cr_check_runs (
  run_id uuid primary key default gen_random_uuid(),
  cr_id uuid not null references change_requests(cr_id) on delete cascade,
  project_id uuid not null references projects(id) on delete cascade,
  name text not null,
  run text not null,
  timeout_s integer not null,
  head_sha text not null,
  base_sha text not null,
  commit_sha text,
  status text not null default 'queued',
  exit_code integer,
  log text not null default '',
  -- The hidden session whose sandbox runs it, and the API process running it (cluster.ts): a run whose process died
  -- goes back to the queue.
  session_id text,
  instance_id text,
  started_at timestamptz,
  finished_at timestamptz,
  created_at timestamptz not null default now(),
  unique (cr_id, name, head_sha, base_sha)
);
create index cr_check_runs_queued on cr_check_runs (status, created_at);

-- Auto-merge: the CR waits in its base's queue (ordered by auto_merge_at) until its checks pass, then merges as
-- the person who asked. `auto_merge_note` says why the queue let it go (a conflict, a failed check).
alter table change_requests add column auto_merge_by uuid;
alter table change_requests add column auto_merge_at timestamptz;
alter table change_requests add column auto_merge_note text;
-- How many times failed checks went back to the CR's agent ([review] fix_checks).
alter table change_requests add column fix_rounds integer not null default 0;

-- A check's sandbox runs under a session of its own, never listed with the agents' sessions.
alter table project_sessions add column purpose text not null default 'agent';
