-- A CR merge's intent: written before the base branch moves, removed in the transaction that records the merge (or
-- when the move fails). One left behind is a merge a crash interrupted between the two; the repair at start and on
-- a timer (api/change-requests/service.ts) settles it against the base branch: the CR becomes merged with exactly
-- this commit if the base holds it, else the intent is dropped and the CR stays open.
create table cr_merge_intents (
  cr_id uuid primary key references change_requests(cr_id) on delete cascade,
  -- Which attempt this is: a settlement removes only the intent it looked at, never a newer one.
  intent_id uuid not null default gen_random_uuid(),
  project_id uuid not null references projects(id) on delete cascade,
  base_ref text not null,
  target_sha text not null,
  base_sha text not null,
  head_sha text not null,
  merged_by uuid not null,
  -- The API process that merges (orchestrator/cluster.ts): its intents are left alone while it lives.
  instance_id text not null,
  created_at timestamptz not null default now()
);
