-- A project's own model gateway is set as its secrets (SVC_LLM_BASE_URL, SVC_LLM_API_KEY, SVC_AGENT_MODEL): the
-- only SVC_ names a secret may have; every other stays the platform's (protocol/secret.ts says the same).
alter table project_secrets drop constraint project_secrets_name_check;
alter table project_secrets add constraint project_secrets_name_check check (
  name ~ '^[A-Za-z_][A-Za-z0-9_]*$'
  and (upper(name) not like 'SVC\_%' or name in ('SVC_LLM_BASE_URL', 'SVC_LLM_API_KEY', 'SVC_AGENT_MODEL'))
);
