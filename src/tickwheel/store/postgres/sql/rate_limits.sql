-- Rate limits (issue 14, docs/flow-control.md "Rate limits"): token buckets per tenant and
-- definition ('' for the tenant's own). The claim statements pass over every READY row under a
-- bucket; the store's rate step (claims.py) draws tokens here and names the rows it may start.

-- name: rate_limit_exists
SELECT EXISTS (SELECT 1 FROM rate_limits) AS present;

-- name: rate_limit_lock
-- Every bucket, locked in key order (rate steps therefore run one at a time, and never wait on
-- each other in a cycle), with the instant of the claim: the database's clock unless given.
SELECT tenant, definition_uri, rate_limit, period_seconds, burst, tokens,
    greatest(0, extract(epoch FROM (coalesce(%(now)s::timestamptz, now()) - refilled_at)))::float8
        AS elapsed
FROM rate_limits
ORDER BY tenant, definition_uri
FOR UPDATE;

-- name: rate_limit_candidates
-- The first READY rows, in claim order, of each lane: a bucket with a token, walked from
-- executions_ready_tenant (one tenant's rows). A tenant's lane leaves out the definitions that
-- have a bucket of their own (they have their own lane, or none while it is empty). Paused rows
-- are left out as in the claim.
SELECT c.execution_id, c.tenant, c.definition_uri
FROM jsonb_to_recordset(%(lanes)s::jsonb) AS b (tenant text, definition_uri text, exclude jsonb)
CROSS JOIN LATERAL (
    SELECT e.execution_id, e.tenant, e.definition_uri, e.priority, e.ready_at
    FROM executions e
    WHERE e.status = 'READY' AND e.tenant = b.tenant
      AND (b.definition_uri = '' OR e.definition_uri = b.definition_uri)
      AND NOT (b.exclude ? e.definition_uri)
      AND (%(definition_uris)s::text[] IS NULL
           OR e.definition_uri = ANY (%(definition_uris)s::text[]))
      AND NOT EXISTS (SELECT 1 FROM pauses p
                      WHERE p.tenant = e.tenant
                        AND p.definition_uri IN ('', e.definition_uri)
                        AND p.probe_execution_id IS DISTINCT FROM e.execution_id)
    ORDER BY e.priority DESC, e.ready_at
    LIMIT %(limit)s
) AS c
ORDER BY c.priority DESC, c.ready_at;

-- name: rate_limit_take
-- The tokens left after a claim, counted at its instant.
UPDATE rate_limits r
SET tokens = t.tokens, refilled_at = coalesce(%(now)s::timestamptz, now())
FROM jsonb_to_recordset(%(taken)s::jsonb) AS t (tenant text, definition_uri text, tokens float8)
WHERE r.tenant = t.tenant AND r.definition_uri = t.definition_uri;

-- name: rate_limit_set
-- A new bucket starts full; a changed one keeps its tokens (refilled to now under the old rate),
-- at most the new burst.
INSERT INTO rate_limits AS r (tenant, definition_uri, rate_limit, period_seconds, burst,
                              definition_version, tokens, refilled_at, updated_at)
VALUES (%(tenant)s, %(definition_uri)s, %(rate_limit)s, %(period_seconds)s, %(burst)s,
        %(definition_version)s, %(burst)s, coalesce(%(now)s::timestamptz, now()),
        coalesce(%(now)s::timestamptz, now()))
ON CONFLICT (tenant, definition_uri) DO UPDATE
SET rate_limit = EXCLUDED.rate_limit, period_seconds = EXCLUDED.period_seconds,
    burst = EXCLUDED.burst, definition_version = EXCLUDED.definition_version,
    tokens = least(EXCLUDED.burst::float8,
                   least(r.burst::float8,
                         r.tokens + greatest(0, extract(epoch FROM (EXCLUDED.refilled_at
                                                                    - r.refilled_at)))::float8
                                    * r.rate_limit / r.period_seconds)),
    refilled_at = EXCLUDED.refilled_at, updated_at = EXCLUDED.updated_at
-- A definition's bucket follows its newest version seen (an older version's submission changes
-- nothing); a tenant's (definition_version NULL) is set through the API.
WHERE EXCLUDED.definition_version IS NULL OR r.definition_version <= EXCLUDED.definition_version;

-- name: rate_limit_drop_definition
-- A definition version without rateLimit: the bucket an older version made goes.
DELETE FROM rate_limits
WHERE tenant = %(tenant)s AND definition_uri = %(definition_uri)s
  AND definition_version <= %(definition_version)s;

-- name: rate_limit_clear
DELETE FROM rate_limits WHERE tenant = %(tenant)s AND definition_uri = %(definition_uri)s;

-- name: rate_limit_list
-- A tenant's buckets with their tokens refilled to now.
SELECT tenant, definition_uri, rate_limit, period_seconds, burst, definition_version, tokens,
    greatest(0, extract(epoch FROM (coalesce(%(now)s::timestamptz, now()) - refilled_at)))::float8
        AS elapsed,
    coalesce(%(now)s::timestamptz, now()) AS at
FROM rate_limits
WHERE tenant = %(tenant)s
ORDER BY definition_uri;

-- name: rate_limit_all
-- Every bucket (the /metrics gauges), refilled to now.
SELECT tenant, definition_uri, rate_limit, period_seconds, burst, definition_version, tokens,
    greatest(0, extract(epoch FROM (coalesce(%(now)s::timestamptz, now()) - refilled_at)))::float8
        AS elapsed,
    coalesce(%(now)s::timestamptz, now()) AS at
FROM rate_limits
ORDER BY tenant, definition_uri;

-- name: rate_limit_waiting
-- READY executions held back by a rate limit, per definition (the /metrics gauge): only read
-- while some bucket exists.
SELECT e.definition_uri, count(*) AS n
FROM executions e
WHERE e.status = 'READY' AND EXISTS (SELECT 1 FROM rate_limits)
  AND EXISTS (SELECT 1 FROM rate_limits r
              WHERE r.tenant = e.tenant AND r.definition_uri IN ('', e.definition_uri))
GROUP BY e.definition_uri;

-- name: rate_limit_get
-- One bucket's settings: a submission writes only when its definition version changes them.
SELECT rate_limit, period_seconds, burst, definition_version
FROM rate_limits
WHERE tenant = %(tenant)s AND definition_uri = %(definition_uri)s;

-- name: tenant_weight_set
INSERT INTO tenant_weights (tenant, weight, updated_at)
VALUES (%(tenant)s, %(weight)s, now())
ON CONFLICT (tenant) DO UPDATE SET weight = EXCLUDED.weight, updated_at = EXCLUDED.updated_at;

-- name: tenant_weight_clear
DELETE FROM tenant_weights WHERE tenant = %(tenant)s;

-- name: tenant_weight_get
SELECT weight FROM tenant_weights WHERE tenant = %(tenant)s;
