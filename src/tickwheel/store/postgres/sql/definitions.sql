-- name: definition_insert
INSERT INTO definitions (name, version, document, content_hash, created_at)
VALUES (%(name)s, %(version)s, %(document)s, %(content_hash)s, %(created_at)s)
ON CONFLICT (name, version) DO NOTHING;

-- name: definition_get_version
SELECT name, version, document, content_hash, created_at
FROM definitions WHERE name = %(name)s AND version = %(version)s;

-- name: definition_get_latest
SELECT name, version, document, content_hash, created_at
FROM definitions WHERE name = %(name)s ORDER BY version DESC LIMIT 1;

-- name: definition_list_latest
SELECT DISTINCT ON (name COLLATE "C") name, version, document, content_hash, created_at
FROM definitions
ORDER BY name COLLATE "C", version DESC;

-- name: definition_versions
SELECT name, version, document, content_hash, created_at
FROM definitions WHERE name = %(name)s ORDER BY version;
