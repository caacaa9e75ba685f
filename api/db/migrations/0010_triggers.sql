-- Runtime state of the manifest's triggers (the definitions live in svc.toml on the default branch).
create table trigger_state (
  project_id uuid not null references projects(id) on delete cascade,
  slug text not null,
  -- The schedule the leader runs, and since when: a missed instant before `scheduled_since` is never caught up.
  schedule text,
  scheduled_since timestamptz,
  last_fired_at timestamptz,
  last_session_id text,
  last_error text,
  updated_at timestamptz not null default now(),
  primary key (project_id, slug)
);

-- One row per fired instant, inserted before the session is created: whoever inserts it fires, nobody else
-- (another API process, a standby that took over, a restart catching up). Manual fires claim `now()`.
create table trigger_firings (
  project_id uuid not null references projects(id) on delete cascade,
  slug text not null,
  scheduled_at timestamptz not null,
  manual boolean not null default false,
  claimed_by text,
  session_id text references project_sessions(session_id) on delete set null,
  error text,
  created_at timestamptz not null default now(),
  primary key (project_id, slug, scheduled_at)
);

-- Sessions a trigger spawned carry its slug (the column exists since 0001 on fresh installs).
alter table project_sessions add column if not exists trigger_slug text;

-- The leading scheduler asks every few seconds which projects had a CR merged (by any API process).
create index change_requests_merged_at_idx on change_requests(merged_at) where merged_at is not null;
