-- name: api_key_insert
INSERT INTO api_keys (key_id, tenant, scope, name, key_hash, created_at)
VALUES (:key_id, :tenant, :scope, :name, :key_hash, :created_at);

-- name: api_key_by_hash
SELECT key_id, tenant, scope, name, created_at, revoked_at
FROM api_keys WHERE key_hash = :key_hash AND revoked_at IS NULL;

-- name: api_key_list
SELECT key_id, tenant, scope, name, created_at, revoked_at
FROM api_keys WHERE (:tenant IS NULL OR tenant = :tenant) ORDER BY created_at, key_id;

-- name: api_key_revoke
UPDATE api_keys SET revoked_at = :now WHERE key_id = :key_id AND revoked_at IS NULL;

-- name: api_key_count
SELECT count(*) AS n FROM api_keys WHERE revoked_at IS NULL;
