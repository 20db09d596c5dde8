-- Definitions and workflow definitions belong to an owner: a tenant's name, or '' for the shared
-- registry the operator publishes (never NULL, so that the owner can be part of the primary key).
-- A name resolves to the tenant's own definition when the tenant owns any version of it, else to
-- the shared one; the primary key (owner, name, version) serves both lookups of that rule.
--
-- Rows stored before owners existed were registered by whichever tenant's admin, into the one
-- registry everyone used: they become shared, and the operator should review them.

ALTER TABLE definitions ADD COLUMN owner text NOT NULL DEFAULT '';
ALTER TABLE definitions ALTER COLUMN owner DROP DEFAULT;
ALTER TABLE definitions DROP CONSTRAINT definitions_pkey;
ALTER TABLE definitions ADD PRIMARY KEY (owner, name, version);

ALTER TABLE workflow_definitions ADD COLUMN owner text NOT NULL DEFAULT '';
ALTER TABLE workflow_definitions ALTER COLUMN owner DROP DEFAULT;
ALTER TABLE workflow_definitions DROP CONSTRAINT workflow_definitions_pkey;
ALTER TABLE workflow_definitions ADD PRIMARY KEY (owner, name, version);

-- The operator scope sits above admin: it publishes to the shared registry.
ALTER TABLE api_keys DROP CONSTRAINT api_keys_scope_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_scope_check
    CHECK (scope IN ('read', 'submit', 'admin', 'operator'));
