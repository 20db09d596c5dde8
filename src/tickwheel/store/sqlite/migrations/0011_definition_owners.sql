-- Definitions and workflow definitions belong to an owner: a tenant's name, or '' for the shared
-- registry the operator publishes (never NULL, so that the owner can be part of the primary key).
-- A name resolves to the tenant's own definition when the tenant owns any version of it, else to
-- the shared one; the primary key (owner, name, version) serves both lookups of that rule.
--
-- Rows stored before owners existed were registered by whichever tenant's admin, into the one
-- registry everyone used: they become shared, and the operator should review them.
--
-- SQLite cannot change a primary key or a CHECK in place: the three tables are rebuilt (nothing
-- references them by foreign key).

CREATE TABLE definitions_0011 AS SELECT * FROM definitions;
DROP TABLE definitions;
CREATE TABLE definitions (
    name          TEXT    NOT NULL,
    version       INTEGER NOT NULL CHECK (version > 0),
    document      TEXT    NOT NULL,
    content_hash  TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    -- Last, like PostgreSQL's ADD COLUMN: both backends keep one column order.
    owner         TEXT    NOT NULL,
    PRIMARY KEY (owner, name, version)
);
INSERT INTO definitions (name, version, document, content_hash, created_at, owner)
SELECT name, version, document, content_hash, created_at, '' FROM definitions_0011;
DROP TABLE definitions_0011;

CREATE TABLE workflow_definitions_0011 AS SELECT * FROM workflow_definitions;
DROP TABLE workflow_definitions;
CREATE TABLE workflow_definitions (
    name          TEXT    NOT NULL,
    version       INTEGER NOT NULL,
    document      TEXT    NOT NULL,
    content_hash  TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    -- Last, like PostgreSQL's ADD COLUMN: both backends keep one column order.
    owner         TEXT    NOT NULL,
    PRIMARY KEY (owner, name, version)
);
INSERT INTO workflow_definitions (name, version, document, content_hash, created_at, owner)
SELECT name, version, document, content_hash, created_at, '' FROM workflow_definitions_0011;
DROP TABLE workflow_definitions_0011;

-- The operator scope sits above admin: it publishes to the shared registry.
CREATE TABLE api_keys_0011 AS SELECT * FROM api_keys;
DROP TABLE api_keys;
CREATE TABLE api_keys (
    key_id      TEXT    NOT NULL PRIMARY KEY,
    tenant      TEXT    NOT NULL,
    scope       TEXT    NOT NULL CHECK (scope IN ('read', 'submit', 'admin', 'operator')),
    name        TEXT    NOT NULL DEFAULT '',
    key_hash    TEXT    NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);
INSERT INTO api_keys SELECT key_id, tenant, scope, name, key_hash, created_at, revoked_at
FROM api_keys_0011;
DROP TABLE api_keys_0011;
