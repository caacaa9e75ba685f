-- A session's conversation as svc stores it (GET .../transcript): the person's messages, written where they enter
-- the API, and the agent's text and tool parts, written by the transcript recorder as the daemon reports them. It
-- goes with its session.
create sequence session_transcript_rev;

create table session_transcript (
  session_id text not null references project_sessions(session_id) on delete cascade,
  -- Order of first appearance: a part that grows keeps its place.
  seq bigserial not null,
  -- 'user:<uuid>' for a person's message; the runtime's part id for the agent's.
  entry_key text not null,
  role text not null check (role in ('user', 'assistant', 'tool')),
  conversation text,
  text text not null,
  tool jsonb,
  at timestamptz not null,
  -- Bumped on every change: readers ask for what changed after the highest they saw.
  rev bigint not null default nextval('session_transcript_rev'),
  primary key (session_id, entry_key)
);

create index session_transcript_order on session_transcript (session_id, seq);

-- The session's checkpoint (refs/svc/checkpoints/<session id>): the commit of the work its last sandbox had not
-- pushed when it stopped, null when there was none. Written after each push of the session's sandbox.
alter table project_sessions add column checkpoint_sha text;
