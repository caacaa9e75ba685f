-- Teams, part 4 (issue 32): the audit log, plans with their session caps, and usage.

-- What was done to an account, by whom and when (api/audit/). Append-only: the code has no update or delete of it,
-- and the triggers below refuse both (and truncate) to anyone who tries through SQL. No foreign keys: an entry
-- outlives the user, project or token it names. `details` holds names (secret names, body field names), never a
-- value.
create table audit_events (
  id bigint generated always as identity primary key,
  account_id uuid not null,
  at timestamptz not null default now(),
  actor_user_id uuid not null,
  -- The actor's email when the act was recorded: a later change of address does not rewrite history.
  actor_email text,
  actor_kind text not null check (actor_kind in ('user', 'project_token', 'sandbox')),
  action text not null,
  resource_type text not null,
  resource_id text,
  project_id uuid,
  request_id text,
  client_address text,
  status integer,
  details jsonb not null default '{}'::jsonb
);
create index audit_events_account_idx on audit_events(account_id, id desc);

create function audit_events_append_only() returns trigger language plpgsql as $$
begin
  raise exception 'audit_events is append-only';
end
$$;
create trigger audit_events_no_change before update or delete on audit_events
  for each row execute function audit_events_append_only();
create trigger audit_events_no_truncate before truncate on audit_events
  for each statement execute function audit_events_append_only();

-- An account's plan (a name of the stack's SVC_PLANS); null: the stack's default plan, whichever it is now.
-- `session_cap` (already there) overrides the plan's cap for one account.
alter table accounts alter column tier drop not null;
alter table accounts alter column tier drop default;
update accounts set tier = null where tier = 'selfhost';

-- When a sandbox stopped (stopped, error, archived): usage counts a sandbox from created_at to here. Sandboxes that
-- ended before this column existed last changed when they ended.
alter table session_sandboxes add column stopped_at timestamptz;
update session_sandboxes set stopped_at = updated_at where status in ('stopped', 'error', 'archived');
