-- One row: this installation's id. Sandboxes carry it as a label, so stacks sharing a Docker engine never
-- reconcile each other's containers away.
create table installation (
  id uuid primary key default gen_random_uuid(),
  singleton boolean not null default true unique check (singleton)
);
insert into installation default values on conflict do nothing;
