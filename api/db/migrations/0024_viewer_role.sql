-- Account roles (issue 32): owner > admin > member > viewer, each allowed what the next allows and more
-- (api/auth/route-roles.ts says who may call what). 0001 accepted the first three only. Replaced by name, and
-- `if exists`, so a database whose constraint another migration already replaced takes this one the same way.
alter table memberships drop constraint if exists memberships_role_check;
alter table memberships add constraint memberships_role_check check (role in ('owner', 'admin', 'member', 'viewer'));
