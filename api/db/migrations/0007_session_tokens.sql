-- A session's project token (SVC_CLI_TOKEN) is bound to its session: authentication accepts it only while a
-- provisioning or active sandbox row references it (session_sandboxes.token_id), so no token outlives its
-- sandbox even when a teardown's revocation was missed. Null: a user token or a project token a user minted.
alter table tokens add column session_id text references project_sessions(session_id) on delete cascade;
update tokens t set session_id = b.session_id from session_sandboxes b where b.token_id = t.id;
create index session_sandboxes_token_idx on session_sandboxes(token_id) where token_id is not null;
