-- Short-lived git credentials (SPEC: clone-credential). Only a SHA-256 is stored; they expire in minutes.
create table clone_credentials (
  id uuid primary key default gen_random_uuid(),
  project_id uuid not null references projects(id) on delete cascade,
  user_id uuid not null,
  sandbox_id uuid references session_sandboxes(sandbox_id) on delete cascade,
  credential_hash text not null unique,
  expires_at timestamptz not null,
  created_at timestamptz not null default now()
);
create index clone_credentials_expiry_idx on clone_credentials(expires_at);
