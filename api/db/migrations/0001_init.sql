create table accounts (
  id uuid primary key default gen_random_uuid(),
  name text not null,
  slug text not null unique,
  tier text not null default 'selfhost',
  session_cap integer,
  created_at timestamptz not null default now()
);

create table users (
  id uuid primary key default gen_random_uuid(),
  email text not null unique,
  name text not null,
  is_admin boolean not null default false,
  created_at timestamptz not null default now()
);

create table memberships (
  account_id uuid not null references accounts(id) on delete cascade,
  user_id uuid not null references users(id) on delete cascade,
  role text not null default 'member' check (role in ('owner', 'admin', 'member')),
  created_at timestamptz not null default now(),
  primary key (account_id, user_id)
);
create index memberships_user_idx on memberships(user_id);

create table projects (
  id uuid primary key default gen_random_uuid(),
  account_id uuid not null references accounts(id) on delete cascade,
  slug text not null,
  name text not null,
  repo_kind text not null check (repo_kind in ('managed', 'external')),
  repo_url text,
  default_branch text not null default 'main',
  -- Last CR number handed out; bumped under the row lock in the CR insert's transaction, never decremented.
  cr_number_seq integer not null default 0,
  created_by uuid,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (account_id, slug)
);

-- Only a SHA-256 of each token is stored. project_id null: user token; set: project token.
create table tokens (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references users(id) on delete cascade,
  project_id uuid references projects(id) on delete cascade,
  name text not null default '',
  token_hash text not null unique,
  prefix text not null,
  expires_at timestamptz,
  last_used_at timestamptz,
  revoked_at timestamptz,
  created_at timestamptz not null default now()
);
create index tokens_user_idx on tokens(user_id);
create index tokens_project_idx on tokens(project_id) where project_id is not null;

create table project_sessions (
  session_id text primary key default gen_random_uuid()::text,
  account_id uuid not null references accounts(id) on delete cascade,
  project_id uuid not null references projects(id) on delete cascade,
  status text not null default 'provisioning'
    check (status in ('queued', 'branching', 'provisioning', 'running', 'stopped', 'failed', 'completed')),
  branch text not null,
  base_ref text not null,
  agent_name text not null,
  agent_model text,
  initial_prompt text,
  trigger_slug text,
  sandbox_url text,
  error text,
  created_by uuid not null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index project_sessions_project_idx on project_sessions(project_id);
create index project_sessions_account_status_idx on project_sessions(account_id, status);

create table session_sandboxes (
  sandbox_id uuid primary key default gen_random_uuid(),
  session_id text not null references project_sessions(session_id) on delete cascade,
  project_id uuid not null references projects(id) on delete cascade,
  status text not null default 'provisioning'
    check (status in ('provisioning', 'active', 'stopped', 'error', 'archived')),
  -- SHA-256 of the sandbox service key (SVC_TOKEN); the key itself only lives in the container's env.
  service_key_hash text unique,
  token_id uuid references tokens(id) on delete set null,
  container_id text,
  image text,
  url text,
  error text,
  last_activity_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index session_sandboxes_session_idx on session_sandboxes(session_id);
create index session_sandboxes_status_idx on session_sandboxes(status);

create table change_requests (
  cr_id uuid primary key default gen_random_uuid(),
  account_id uuid not null references accounts(id) on delete cascade,
  project_id uuid not null references projects(id) on delete cascade,
  number integer not null check (number > 0),
  title text not null check (length(title) > 0),
  description text not null default '',
  base_ref text not null,
  head_ref text not null,
  status text not null default 'open' check (status in ('open', 'merged', 'closed')),
  head_commit_sha text,
  base_commit_sha text,
  origin_session_id text references project_sessions(session_id) on delete set null,
  created_by uuid not null,
  merged_at timestamptz,
  merged_by uuid,
  merge_commit_sha text,
  closed_at timestamptz,
  closed_by uuid,
  metadata jsonb not null default '{}'::jsonb,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (project_id, number),
  check (head_ref <> base_ref)
);
create index change_requests_account_idx on change_requests(account_id);
create index change_requests_project_status_idx on change_requests(project_id, status);
