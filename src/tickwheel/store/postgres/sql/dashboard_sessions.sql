-- name: dashboard_session_insert
INSERT INTO dashboard_sessions (session_hash, key_id, created_at, expires_at)
VALUES (%(session_hash)s, %(key_id)s, %(created_at)s, %(expires_at)s);

-- name: dashboard_session_get
-- A live session and its key; a revoked key ends its sessions (the key row is never deleted).
SELECT s.expires_at, k.key_id, k.tenant, k.scope, k.name, k.created_at, k.revoked_at
FROM dashboard_sessions s LEFT JOIN api_keys k ON k.key_id = s.key_id
WHERE s.session_hash = %(session_hash)s AND s.expires_at > %(now)s
  AND (s.key_id IS NULL OR k.revoked_at IS NULL);

-- name: dashboard_session_delete
DELETE FROM dashboard_sessions WHERE session_hash = %(session_hash)s;

-- name: dashboard_session_prune
DELETE FROM dashboard_sessions WHERE expires_at <= %(now)s;
