-- name: execution_insert
INSERT INTO executions (
    execution_id, tenant, definition_uri, definition_version, input_snapshot, execute_at,
    bucket_start, shard_id, idempotency_key, request_fingerprint, status, priority,
    attempt_count, max_attempts, ready_at, created_at, updated_at, trace_context, start_by,
    deadline, concurrency_key, concurrency_limit, concurrency_order
) VALUES (
    :execution_id, :tenant, :definition_uri, :definition_version, :input_snapshot, :execute_at,
    :bucket_start, :shard_id, :idempotency_key, :request_fingerprint, :status, :priority,
    0, :max_attempts, :ready_at, :created_at, :created_at, :trace_context, :start_by, :deadline,
    :concurrency_key, :concurrency_limit, :concurrency_order
)
ON CONFLICT (tenant, idempotency_key) DO NOTHING
RETURNING *;

-- name: execution_get_by_key
SELECT * FROM executions WHERE tenant = :tenant AND idempotency_key = :idempotency_key;

-- name: execution_get
SELECT * FROM executions WHERE tenant = :tenant AND execution_id = :execution_id;

-- name: execution_list
-- Optional filters are NULL when unused; the status filter is a JSON array of statuses.
SELECT * FROM executions
WHERE tenant = :tenant
  AND (:before IS NULL OR execution_id < :before)
  AND (:statuses IS NULL OR status IN (SELECT value FROM json_each(:statuses)))
  AND (:definition_uri IS NULL OR definition_uri = :definition_uri)
  AND (:idempotency_key IS NULL OR idempotency_key = :idempotency_key)
  -- A prefix as a range (BINARY collation: code point order) on the (tenant, idempotency_key)
  -- unique index; the substr test keeps it exact for keys holding U+10FFFF itself.
  AND (:key_prefix IS NULL OR (idempotency_key >= :key_prefix
       AND idempotency_key < :key_prefix || char(1114111)
       AND substr(idempotency_key, 1, length(:key_prefix)) = :key_prefix))
  AND (:execute_from IS NULL OR execute_at >= :execute_from)
  AND (:execute_to IS NULL OR execute_at < :execute_to)
ORDER BY execution_id DESC
LIMIT :limit;

-- name: execution_cancel
-- Guarded: only the statuses a cancel may leave. A claim that committed first makes this match
-- nothing, and the caller reports why.
UPDATE executions
SET status = 'CANCELLED', finished_at = :now, updated_at = :now, next_attempt_at = NULL
WHERE tenant = :tenant AND execution_id = :execution_id
  AND status IN ('SCHEDULED', 'READY', 'RETRY_WAIT')
RETURNING *;

-- name: execution_cancel_unstarted
-- Like execution_cancel, but only an execution that never started: a paused cron job's
-- occurrences that are waiting for their time or for a worker.
UPDATE executions
SET status = 'CANCELLED', finished_at = :now, updated_at = :now, next_attempt_at = NULL
WHERE tenant = :tenant AND execution_id = :execution_id
  AND status IN ('SCHEDULED', 'READY')
RETURNING *;

-- name: execution_replay
-- A fresh budget on top of the attempts already made: attempt numbers keep growing, so the
-- history of the dead letter's attempts stays intact next to the new ones.
UPDATE executions
SET status = 'READY', max_attempts = attempt_count + :max_attempts, ready_at = :now,
    cancel_requested_at = NULL,
    next_attempt_at = NULL, finished_at = NULL, error = NULL, lease_owner = NULL,
    lease_expires_at = NULL, updated_at = :now
WHERE tenant = :tenant AND execution_id = :execution_id AND status = 'FAILED'
RETURNING *;

-- name: execution_event_insert
INSERT INTO execution_events (execution_id, kind, at, detail)
VALUES (:execution_id, :kind, :at, :detail);

-- name: execution_event_list
SELECT ev.execution_id, ev.kind, ev.at, ev.detail
FROM execution_events ev JOIN executions e ON e.execution_id = ev.execution_id
WHERE e.tenant = :tenant AND ev.execution_id = :execution_id
ORDER BY ev.event_id;

-- name: attempt_list
SELECT a.* FROM attempts a JOIN executions e ON e.execution_id = a.execution_id
WHERE e.tenant = :tenant AND a.execution_id = :execution_id
ORDER BY a.attempt_number;

-- name: execution_heartbeat
UPDATE executions SET lease_expires_at = :lease_expires_at, updated_at = :now
WHERE execution_id = :execution_id AND status = 'RUNNING' AND fencing_token = :fencing_token;

-- name: execution_lease_expired
SELECT * FROM executions
WHERE status = 'RUNNING' AND lease_expires_at < :now
ORDER BY lease_expires_at
LIMIT :limit;

-- name: execution_lease_next
-- When the reaper would next find an expired lease (microseconds; NULL: nothing runs).
SELECT min(lease_expires_at) AS due
FROM executions
WHERE status = 'RUNNING';

-- name: execution_release
-- It keeps its ready_at, so its place in the claim order (promotion.sql says why).
UPDATE executions
SET status = 'READY', ready_at = coalesce(ready_at, :now), max_attempts = max_attempts + 1, lease_owner = NULL,
    lease_expires_at = NULL, updated_at = :now
WHERE execution_id = :execution_id AND status = 'RUNNING' AND fencing_token = :fencing_token
RETURNING attempt_count;

-- name: execution_reap_batch
-- One row of the reaper's batch (SQLite has no arrays: the store runs it per row, all in one
-- write transaction). Moves the row only while it is RUNNING under the token the reaper read and
-- its lease is still expired. A lost attempt that is retried is given back to the budget
-- (domain/retry.py: lost attempts are counted apart, under a cap of their own).
UPDATE executions
SET status = :status, error = :error, next_attempt_at = :next_attempt_at,
    max_attempts = max_attempts + CASE WHEN :status = 'RETRY_WAIT' THEN 1 ELSE 0 END,
    lease_owner = NULL, lease_expires_at = NULL,
    finished_at = CASE WHEN :status IN ('FAILED', 'CANCELLED') THEN :now END,
    updated_at = :now
WHERE execution_id = :execution_id AND status = 'RUNNING' AND fencing_token = :fencing_token
  AND lease_expires_at < :now
RETURNING execution_id, attempt_count, idempotency_key, status;

-- name: attempt_count_lost
-- Per execution, its attempts lost to a worker's death (the reaper's ABANDONED, kind "lost"; a
-- release is not one) since it was last replayed: a replay gives a fresh budget of both kinds.
SELECT a.execution_id, count(*) AS n
FROM attempts a
WHERE a.execution_id IN (SELECT value FROM json_each(:execution_ids))
  AND a.status = 'ABANDONED' AND json_extract(a.error, '$.kind') = 'lost'
  AND a.attempt_number > coalesce((
      SELECT json_extract(ev.detail, '$.attemptCount') FROM execution_events ev
      WHERE ev.execution_id = a.execution_id AND ev.kind = 'replayed'
      ORDER BY ev.event_id DESC
      LIMIT 1
  ), 0)
GROUP BY a.execution_id;

-- name: attempt_reap_batch
UPDATE attempts SET status = :attempt_status, finished_at = :now, error = :error
WHERE execution_id = :execution_id AND attempt_number = :attempt_number
  AND fencing_token = :fencing_token AND status = 'RUNNING';
