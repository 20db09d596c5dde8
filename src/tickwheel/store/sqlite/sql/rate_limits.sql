-- Rate limits (issue 14, docs/flow-control.md "Rate limits"): token buckets per tenant and
-- definition ('' for the tenant's own). The claim statements pass over every READY row under a
-- bucket; the store's rate step (claims.py) draws tokens here, in the claim's write
-- transaction, and names the rows it may start. Instants are integer microseconds (UTC).

-- name: rate_limit_exists
SELECT EXISTS (SELECT 1 FROM rate_limits) AS present;

-- name: rate_limit_lock
-- Every bucket; the claim's write transaction is the lock.
SELECT tenant, definition_uri, rate_limit, period_seconds, burst, tokens,
    max(0, :now - refilled_at) / 1e6 AS elapsed
FROM rate_limits
ORDER BY tenant, definition_uri;

-- name: rate_limit_candidates
-- The first READY rows, in claim order, of one lane: a bucket with a token, walked from
-- executions_ready_tenant (one tenant's rows). A tenant's lane leaves out the definitions that
-- have a bucket of their own (exclude, a JSON array). Paused rows are left out as in the claim.
SELECT e.execution_id, e.tenant, e.definition_uri, e.priority, e.ready_at
FROM executions e INDEXED BY executions_ready_tenant
WHERE e.status = 'READY' AND e.tenant = :tenant
  AND (:definition_uri = '' OR e.definition_uri = :definition_uri)
  AND e.definition_uri NOT IN (SELECT value FROM json_each(:exclude))
  AND (:definition_uris IS NULL
       OR e.definition_uri IN (SELECT value FROM json_each(:definition_uris)))
  AND NOT EXISTS (SELECT 1 FROM pauses p
                  WHERE p.tenant = e.tenant
                    AND p.definition_uri IN ('', e.definition_uri)
                    AND p.probe_execution_id IS NOT e.execution_id)
ORDER BY e.priority DESC, e.ready_at
LIMIT :limit;

-- name: rate_limit_take
-- The tokens left after a claim, counted at its instant.
UPDATE rate_limits SET tokens = :tokens, refilled_at = :now
WHERE tenant = :tenant AND definition_uri = :definition_uri;

-- name: rate_limit_set
-- A new bucket starts full; a changed one keeps its tokens (refilled to now under the old rate),
-- at most the new burst. A definition's bucket follows its newest version seen (an older
-- version's submission changes nothing); a tenant's (definition_version NULL) is set through the
-- API.
INSERT INTO rate_limits AS r (tenant, definition_uri, rate_limit, period_seconds, burst,
                              definition_version, tokens, refilled_at, updated_at)
VALUES (:tenant, :definition_uri, :rate_limit, :period_seconds, :burst, :definition_version,
        :burst, :now, :now)
ON CONFLICT (tenant, definition_uri) DO UPDATE
SET rate_limit = excluded.rate_limit, period_seconds = excluded.period_seconds,
    burst = excluded.burst, definition_version = excluded.definition_version,
    tokens = min(excluded.burst,
                 min(r.burst, r.tokens + max(0, excluded.refilled_at - r.refilled_at) / 1e6
                              * r.rate_limit / r.period_seconds)),
    refilled_at = excluded.refilled_at, updated_at = excluded.updated_at
WHERE excluded.definition_version IS NULL OR r.definition_version <= excluded.definition_version;

-- name: rate_limit_drop_definition
-- A definition version without rateLimit: the bucket an older version made goes.
DELETE FROM rate_limits
WHERE tenant = :tenant AND definition_uri = :definition_uri
  AND definition_version <= :definition_version;

-- name: rate_limit_clear
DELETE FROM rate_limits WHERE tenant = :tenant AND definition_uri = :definition_uri;

-- name: rate_limit_list
-- A tenant's buckets.
SELECT tenant, definition_uri, rate_limit, period_seconds, burst, definition_version, tokens,
    max(0, :now - refilled_at) / 1e6 AS elapsed
FROM rate_limits
WHERE tenant = :tenant
ORDER BY definition_uri;

-- name: rate_limit_all
-- Every bucket (the /metrics gauges).
SELECT tenant, definition_uri, rate_limit, period_seconds, burst, definition_version, tokens,
    max(0, :now - refilled_at) / 1e6 AS elapsed
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
WHERE tenant = :tenant AND definition_uri = :definition_uri;

-- name: tenant_weight_set
INSERT INTO tenant_weights (tenant, weight, updated_at)
VALUES (:tenant, :weight, :now)
ON CONFLICT (tenant) DO UPDATE SET weight = excluded.weight, updated_at = excluded.updated_at;

-- name: tenant_weight_clear
DELETE FROM tenant_weights WHERE tenant = :tenant;

-- name: tenant_weight_get
SELECT weight FROM tenant_weights WHERE tenant = :tenant;
