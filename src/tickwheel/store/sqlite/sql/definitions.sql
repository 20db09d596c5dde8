-- name: definition_insert
INSERT INTO definitions (name, version, document, content_hash, created_at)
VALUES (:name, :version, :document, :content_hash, :created_at)
ON CONFLICT (name, version) DO NOTHING;

-- name: definition_get_version
SELECT name, version, document, content_hash, created_at
FROM definitions WHERE name = :name AND version = :version;

-- name: definition_get_latest
SELECT name, version, document, content_hash, created_at
FROM definitions WHERE name = :name ORDER BY version DESC LIMIT 1;

-- name: definition_list_latest
SELECT d.name, d.version, d.document, d.content_hash, d.created_at
FROM definitions d
WHERE d.version = (SELECT max(version) FROM definitions WHERE name = d.name)
ORDER BY d.name;

-- name: definition_versions
SELECT name, version, document, content_hash, created_at
FROM definitions WHERE name = :name ORDER BY version;
