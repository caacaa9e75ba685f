-- CRs created on PostgreSQL before the store cast its JSON text to jsonb hold their metadata as a JSON string
-- ('"{}"'): turn each back into the object it encodes.
update change_requests set metadata = (metadata #>> '{}')::jsonb where jsonb_typeof(metadata) = 'string';
