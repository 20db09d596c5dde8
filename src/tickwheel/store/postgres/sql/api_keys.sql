-- name: api_key_insert
INSERT INTO api_keys (key_id, tenant, scope, name, key_hash, created_at)
VALUES (%(key_id)s, %(tenant)s, %(scope)s, %(name)s, %(key_hash)s, %(created_at)s);

-- name: api_key_by_hash
SELECT key_id, tenant, scope, name, created_at, revoked_at
FROM api_keys WHERE key_hash = %(key_hash)s AND revoked_at IS NULL;

-- name: api_key_list
SELECT key_id, tenant, scope, name, created_at, revoked_at
FROM api_keys WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
ORDER BY created_at, key_id COLLATE "C";

-- name: api_key_revoke
UPDATE api_keys SET revoked_at = %(now)s WHERE key_id = %(key_id)s AND revoked_at IS NULL;

-- name: api_key_count
SELECT count(*) AS n FROM api_keys WHERE revoked_at IS NULL;
