-- Chat channels connected to projects (svc channels): a mention there starts a session in the project.
create table channels (
  id uuid primary key default gen_random_uuid(),
  project_id uuid not null references projects(id) on delete cascade,
  provider text not null check (provider in ('slack')),
  -- null: the channel of that id in the one workspace the installation's bot token serves.
  team_id text,
  channel_id text not null,
  connected_by uuid not null references users(id),
  created_at timestamptz not null default now()
);
-- One channel drives one project across the whole installation.
create unique index channels_provider_team_channel_key on channels (provider, coalesce(team_id, ''), channel_id);
create index channels_project_idx on channels (project_id);

-- Events already taken (Slack retries, replays, several API replicas): whoever inserts the id handles it.
create table channel_events (
  provider text not null,
  event_id text not null,
  received_at timestamptz not null default now(),
  primary key (provider, event_id)
);

-- A thread of a connected channel and the session it talks to.
create table channel_threads (
  channel_uuid uuid not null references channels(id) on delete cascade,
  thread_ts text not null,
  session_id text not null references project_sessions(session_id) on delete cascade,
  created_at timestamptz not null default now(),
  primary key (channel_uuid, thread_ts)
);
create index channel_threads_session_idx on channel_threads (session_id);
