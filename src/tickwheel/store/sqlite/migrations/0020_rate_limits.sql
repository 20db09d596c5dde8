-- Rate limits (issue 14, docs/flow-control.md "Rate limits"): one token bucket per tenant and
-- definition whose definition sets rateLimit (made at the first submission a process sees of
-- that definition version), and one per tenant (definition_uri '') set through the API.
-- tokens as counted at refilled_at (integer microseconds, UTC); the claim refills lazily
-- (tokens + elapsed * rate_limit / period_seconds, at most burst) in its write transaction.
-- The table is empty unless a limit exists: the claim's NOT EXISTS then costs one probe.
CREATE TABLE rate_limits (
    tenant              TEXT        NOT NULL,
    definition_uri      TEXT        NOT NULL,
    rate_limit          INTEGER     NOT NULL CHECK (rate_limit > 0),
    period_seconds      REAL        NOT NULL CHECK (period_seconds > 0),
    burst               INTEGER     NOT NULL CHECK (burst > 0),
    definition_version  INTEGER,
    tokens              REAL        NOT NULL,
    refilled_at         INTEGER     NOT NULL,
    updated_at          INTEGER     NOT NULL,
    PRIMARY KEY (tenant, definition_uri)
);

-- Weights of tenants in the fair claim (docs/flow-control.md "Fair claiming"): a tenant of
-- weight w takes w executions per turn. No row: weight 1. Set by operators through the API.
CREATE TABLE tenant_weights (
    tenant      TEXT        NOT NULL PRIMARY KEY,
    weight      INTEGER     NOT NULL CHECK (weight BETWEEN 1 AND 100),
    updated_at  INTEGER  NOT NULL
);
