-- The API process (its instance id) provisioning a session. With several processes on one database, the leader's
-- reconciler fails a `provisioning` session only when that process no longer holds its instance lock.
alter table project_sessions add column provisioner text;
