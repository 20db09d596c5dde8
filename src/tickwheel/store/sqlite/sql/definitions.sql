-- Definitions belong to an owner: a tenant, or '' for the shared registry. A name resolves for a
-- tenant to its own definition when it owns any version of that name, else to the shared one;
-- each query below applies that rule in one statement over the primary key (owner, name,
-- version). The tenant '' resolves to the shared registry alone.

-- name: definition_insert
-- A tenant may not take a name of the shared registry (its resolution would flip) unless it
-- owns that name already; the operator may publish any name. No row: already there, or refused.
INSERT INTO definitions (owner, name, version, document, content_hash, created_at)
SELECT :owner, :name, :version, :document, :content_hash, :created_at
WHERE :owner = ''
   OR EXISTS (SELECT 1 FROM definitions WHERE owner = :owner AND name = :name)
   OR NOT EXISTS (SELECT 1 FROM definitions WHERE owner = '' AND name = :name)
ON CONFLICT (owner, name, version) DO NOTHING;

-- name: definition_get
-- ``version`` NULL: the latest version of the resolved owner.
SELECT owner, name, version, document, content_hash, created_at
FROM definitions
WHERE name = :name
  AND owner = (SELECT owner FROM definitions
               WHERE name = :name AND owner IN (:tenant, '')
               ORDER BY owner = '' LIMIT 1)
  AND (:version IS NULL OR version = :version)
ORDER BY version DESC LIMIT 1;

-- name: definition_list_latest
SELECT owner, name, version, document, content_hash, created_at
FROM (
    SELECT d.*, row_number() OVER (PARTITION BY name ORDER BY owner = '', version DESC) AS rn
    FROM definitions d
    WHERE owner IN (:tenant, '')
)
WHERE rn = 1
ORDER BY name;

-- name: definition_versions
SELECT owner, name, version, document, content_hash, created_at
FROM definitions
WHERE name = :name
  AND owner = (SELECT owner FROM definitions
               WHERE name = :name AND owner IN (:tenant, '')
               ORDER BY owner = '' LIMIT 1)
ORDER BY version;
