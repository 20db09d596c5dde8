-- The scheduler's queries (see the PostgreSQL file for the why). SQLite has one writer at a
-- time, so the guards need no row locks. Every promotion returns each moved row's definition.

-- name: execution_due_window
-- Each slice's next rows from its cursor, at most :limit per slice. :slices is a JSON array of
-- [shard_id, after_at, after_id, bucket_from, until]; the slice's index says whose row it is.
-- Tenant and priority: the scheduler opens an instant to the claims only when all its rows
-- share both (engine/scheduler.py, DIRECT_MIN). limited: as on PostgreSQL.
SELECT slice, execution_id, shard_id, execute_at, tenant, definition_uri, definition_version,
    priority, limited
FROM (
    SELECT c.key AS slice, e.execution_id, e.shard_id, e.execute_at, e.tenant, e.definition_uri,
        e.definition_version, e.priority, e.concurrency_limit IS NOT NULL AS limited,
        row_number() OVER (
            PARTITION BY c.key ORDER BY e.bucket_start, e.execute_at, e.execution_id
        ) AS n
    FROM json_each(:slices) AS c
    JOIN executions e
      ON e.status = 'SCHEDULED'
     AND e.shard_id = json_extract(c.value, '$[0]')
     AND e.bucket_start >= json_extract(c.value, '$[3]')
     AND e.bucket_start <= json_extract(c.value, '$[4]')
     AND e.execute_at >= json_extract(c.value, '$[1]')
     AND e.execute_at <= json_extract(c.value, '$[4]')
     AND (e.execute_at, e.execution_id)
         > (json_extract(c.value, '$[1]'), json_extract(c.value, '$[2]'))
)
WHERE n <= :limit;

-- name: execution_promote_ids
-- The wheel's firing by id, guarded: still SCHEDULED, in a shard the caller may promote, due.
-- direct (1): the shards are open and the rows the plain claim takes as they are
-- (execution_claim_direct) are left to it, as on PostgreSQL.
UPDATE executions SET status = 'READY', ready_at = :now, updated_at = :now
WHERE execution_id IN (SELECT value FROM json_each(:execution_ids))
  AND status = 'SCHEDULED'
  AND shard_id IN (SELECT value FROM json_each(:shards))
  AND execute_at <= :now
  AND (:direct = 0 OR concurrency_limit IS NOT NULL
       OR EXISTS (SELECT 1 FROM pauses p
                  WHERE p.tenant = executions.tenant
                    AND p.definition_uri IN ('', executions.definition_uri))
       OR EXISTS (SELECT 1 FROM rate_limits r
                  WHERE r.tenant = executions.tenant
                    AND r.definition_uri IN ('', executions.definition_uri)))
RETURNING execution_id, definition_uri, trace_context;

-- name: execution_promote_scheduled
-- The catch-all, shard by shard through executions_due: each probe reads only past buckets.
UPDATE executions SET status = 'READY', ready_at = :now, updated_at = :now
WHERE execution_id IN (
    SELECT execution_id FROM executions
    WHERE status = 'SCHEDULED'
      AND shard_id IN (SELECT value FROM json_each(:shards))
      AND bucket_start <= :now AND execute_at <= :now
    LIMIT :limit
)
RETURNING execution_id, definition_uri, trace_context;

-- name: execution_promote_retries
-- A retry keeps its ready_at (when it first became READY; claims order by it), so it takes its
-- place in the queue back once due instead of going behind every execution that became READY
-- while it ran and waited. Its backoff is served in RETRY_WAIT. (PostgreSQL's file says more.)
UPDATE executions
SET status = 'READY', ready_at = coalesce(ready_at, next_attempt_at), next_attempt_at = NULL,
    updated_at = :now
WHERE execution_id IN (
    SELECT execution_id FROM executions
    WHERE status = 'RETRY_WAIT' AND next_attempt_at <= :now
      AND shard_id IN (SELECT value FROM json_each(:shards))
    ORDER BY next_attempt_at
    LIMIT :limit
)
RETURNING execution_id, definition_uri, trace_context;

-- name: execution_next_scheduled_at
SELECT min(execute_at) AS at FROM executions
WHERE status = 'SCHEDULED'
  AND shard_id IN (SELECT value FROM json_each(:shards))
  AND bucket_start < :horizon AND execute_at < :horizon;

-- name: execution_next_retry_at
SELECT min(next_attempt_at) AS at FROM executions
WHERE status = 'RETRY_WAIT' AND next_attempt_at < :horizon
  AND shard_id IN (SELECT value FROM json_each(:shards));
