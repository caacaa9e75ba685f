-- The manifest (svc.toml) each project's default branch holds, as last read: shared by every API replica and kept
-- across restarts, so an invalid svc.toml merged later still leaves the last good one in force.
create table project_manifests (
  project_id uuid primary key references projects(id) on delete cascade,
  -- The default-branch commit read last, and what was wrong with its svc.toml (null when nothing).
  commit text not null,
  error jsonb,
  -- The last good manifest and the commit it came from.
  manifest jsonb not null,
  manifest_commit text,
  updated_at timestamptz not null default now()
);
