-- Definitions belong to an owner: a tenant, or '' for the shared registry. A name resolves for a
-- tenant to its own definition when it owns any version of that name, else to the shared one;
-- each query below applies that rule in one statement over the primary key (owner, name,
-- version). The tenant '' resolves to the shared registry alone.

-- name: definition_insert
-- A tenant may not take a name of the shared registry (its resolution would flip) unless it
-- owns that name already; the operator may publish any name. No row: already there, or refused.
-- Under READ COMMITTED a tenant's first version and the operator's first shared version of one
-- name may both commit when they race: harmless, since the tenant then owns the name and had no
-- execution pinned to the shared one (there was none to pin before).
INSERT INTO definitions (owner, name, version, document, content_hash, created_at)
SELECT %(owner)s::text, %(name)s, %(version)s, %(document)s, %(content_hash)s, %(created_at)s
WHERE %(owner)s::text = ''
   OR EXISTS (SELECT 1 FROM definitions WHERE owner = %(owner)s::text AND name = %(name)s)
   OR NOT EXISTS (SELECT 1 FROM definitions WHERE owner = '' AND name = %(name)s)
ON CONFLICT (owner, name, version) DO NOTHING;

-- name: definition_get
-- ``version`` NULL: the latest version of the resolved owner.
SELECT owner, name, version, document, content_hash, created_at
FROM definitions
WHERE name = %(name)s
  AND owner = (SELECT owner FROM definitions
               WHERE name = %(name)s AND owner IN (%(tenant)s::text, '')
               ORDER BY owner = '' LIMIT 1)
  AND (%(version)s::integer IS NULL OR version = %(version)s::integer)
ORDER BY version DESC LIMIT 1;

-- name: definition_list_latest
SELECT DISTINCT ON (name COLLATE "C") owner, name, version, document, content_hash, created_at
FROM definitions
WHERE owner IN (%(tenant)s::text, '')
ORDER BY name COLLATE "C", owner = '', version DESC;

-- name: definition_versions
SELECT owner, name, version, document, content_hash, created_at
FROM definitions
WHERE name = %(name)s
  AND owner = (SELECT owner FROM definitions
               WHERE name = %(name)s AND owner IN (%(tenant)s::text, '')
               ORDER BY owner = '' LIMIT 1)
ORDER BY version;
