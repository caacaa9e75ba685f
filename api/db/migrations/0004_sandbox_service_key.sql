-- The sandbox service key sealed with the secrets key: the API needs it to sign X-Svc-User-Context for
-- previews. The hash stays the lookup for authentication.
alter table session_sandboxes add column service_key_enc text;
