-- Comments on a CR (POST/GET .../change-requests/{n}/comments) and `svc cr resolve` requests: a general comment,
-- or one on a line the CR's diff shows (path, new-side line) at the head it was made on. One sent to the agent
-- records the session that took it and whether it got there; it stays when that session is removed.
create table cr_comments (
  id uuid primary key default gen_random_uuid(),
  -- Order of writing: created_at ties within a transaction.
  seq bigserial not null,
  cr_id uuid not null references change_requests(cr_id) on delete cascade,
  kind text not null default 'comment' check (kind in ('comment', 'resolve')),
  -- The person (a session's token acts for the person who started the session), and that session when its agent wrote it.
  author_id uuid not null,
  author_session_id text,
  body text not null check (length(body) > 0),
  path text,
  line integer check (line > 0),
  head_sha text,
  to_agent boolean not null default false,
  session_id text references project_sessions(session_id) on delete set null,
  delivery text check (delivery in ('pending', 'delivered', 'failed')),
  delivery_error text,
  created_at timestamptz not null default now(),
  check (line is null or path is not null),
  check (to_agent = (delivery is not null))
);
create index cr_comments_cr_idx on cr_comments (cr_id, seq);
