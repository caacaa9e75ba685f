-- Approvals of a CR (`svc cr approve`, `[review] required_approvals`): one per person per head approved. A push to
-- the head leaves the earlier head's rows in place as history; only the current head's count.
create table cr_approvals (
  -- Order of writing: created_at ties within a transaction.
  seq bigserial not null,
  cr_id uuid not null references change_requests(cr_id) on delete cascade,
  -- No reference to users: a removed person's approval stays in the history (it no longer counts).
  user_id uuid not null,
  head_sha text not null,
  created_at timestamptz not null default now(),
  -- Approving the same head twice is one approval; also the index the count of a CR's current head reads.
  primary key (cr_id, head_sha, user_id)
);
