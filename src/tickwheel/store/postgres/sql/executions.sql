-- name: execution_insert
-- The whole batch in one statement; parameters are parallel arrays, one element per item.
-- ON CONFLICT DO NOTHING waits for a competing, uncommitted insert of the same key and then
-- skips, so concurrent identical submissions create one row. Rows go in ordered by key: two
-- batches that share keys then wait on each other in the same order and cannot deadlock, and
-- among duplicates inside the batch the earliest item is the one inserted.
INSERT INTO executions (
    execution_id, tenant, definition_uri, definition_version, input_snapshot, execute_at,
    bucket_start, shard_id, idempotency_key, request_fingerprint, status, priority,
    attempt_count, max_attempts, ready_at, created_at, updated_at
)
SELECT
    execution_id, tenant, definition_uri, definition_version, input_snapshot, execute_at,
    bucket_start, shard_id, idempotency_key, request_fingerprint, status, priority,
    0, max_attempts, ready_at, created_at, created_at
FROM unnest(
    %(execution_ids)s::uuid[], %(tenants)s::text[], %(definition_uris)s::text[],
    %(definition_versions)s::integer[], %(input_snapshots)s::jsonb[],
    %(execute_ats)s::timestamptz[], %(bucket_starts)s::timestamptz[], %(shard_ids)s::smallint[],
    %(idempotency_keys)s::text[], %(request_fingerprints)s::text[], %(statuses)s::text[],
    %(priorities)s::integer[], %(max_attempts)s::integer[], %(ready_ats)s::timestamptz[],
    %(created_ats)s::timestamptz[]
) WITH ORDINALITY AS item (
    execution_id, tenant, definition_uri, definition_version, input_snapshot, execute_at,
    bucket_start, shard_id, idempotency_key, request_fingerprint, status, priority,
    max_attempts, ready_at, created_at, position
)
ORDER BY tenant, idempotency_key, position
ON CONFLICT (tenant, idempotency_key) DO NOTHING
RETURNING *;

-- name: execution_get_by_key
-- The executions holding any of the given (tenant, key) pairs: parallel arrays.
SELECT * FROM executions
WHERE (tenant, idempotency_key) IN (
    SELECT * FROM unnest(%(tenants)s::text[], %(idempotency_keys)s::text[])
);

-- name: execution_get
SELECT * FROM executions WHERE tenant = %(tenant)s AND execution_id = %(execution_id)s;

-- name: execution_list
-- Optional filters are NULL when unused.
SELECT * FROM executions
WHERE tenant = %(tenant)s
  AND (%(before)s::uuid IS NULL OR execution_id < %(before)s::uuid)
  AND (%(statuses)s::text[] IS NULL OR status = ANY (%(statuses)s::text[]))
  AND (%(definition_uri)s::text IS NULL OR definition_uri = %(definition_uri)s::text)
  AND (%(idempotency_key)s::text IS NULL OR idempotency_key = %(idempotency_key)s::text)
  -- A prefix: LIKE with the pattern's metacharacters escaped by the store (exact in any
  -- collation); rows are read in the tenant's execution_id order and filtered.
  AND (%(key_like)s::text IS NULL OR idempotency_key LIKE %(key_like)s::text ESCAPE '\')
  AND (%(execute_from)s::timestamptz IS NULL OR execute_at >= %(execute_from)s::timestamptz)
  AND (%(execute_to)s::timestamptz IS NULL OR execute_at < %(execute_to)s::timestamptz)
ORDER BY execution_id DESC
LIMIT %(limit)s;

-- name: execution_cancel
-- Guarded: only the statuses a cancel may leave. A claim that committed first makes this match
-- nothing, and the caller reports why. The row is locked first (waiting for a claim in flight)
-- so that the prior_* columns are the values this update overwrites, for the history event.
WITH prior AS MATERIALIZED (
    SELECT execution_id, status, attempt_count, error FROM executions
    WHERE tenant = %(tenant)s AND execution_id = %(execution_id)s
    FOR UPDATE
)
UPDATE executions e
SET status = 'CANCELLED', finished_at = %(now)s::timestamptz, updated_at = %(now)s::timestamptz,
    next_attempt_at = NULL
FROM prior
WHERE e.execution_id = prior.execution_id
  AND e.status IN ('SCHEDULED', 'READY', 'RETRY_WAIT')
RETURNING e.*, prior.status AS prior_status, prior.attempt_count AS prior_attempt_count,
    prior.error AS prior_error;

-- name: execution_replay
-- A fresh budget on top of the attempts already made: attempt numbers keep growing, so the
-- history of the dead letter's attempts stays intact next to the new ones.
WITH prior AS MATERIALIZED (
    SELECT execution_id, status, attempt_count, error FROM executions
    WHERE tenant = %(tenant)s AND execution_id = %(execution_id)s
    FOR UPDATE
)
UPDATE executions e
SET status = 'READY', max_attempts = e.attempt_count + %(max_attempts)s,
    ready_at = %(now)s::timestamptz, next_attempt_at = NULL, finished_at = NULL, error = NULL,
    lease_owner = NULL, lease_expires_at = NULL, updated_at = %(now)s::timestamptz
FROM prior
WHERE e.execution_id = prior.execution_id AND e.status = 'FAILED'
RETURNING e.*, prior.status AS prior_status, prior.attempt_count AS prior_attempt_count,
    prior.error AS prior_error;

-- name: execution_event_insert
INSERT INTO execution_events (execution_id, kind, at, detail)
VALUES (%(execution_id)s, %(kind)s, %(at)s, %(detail)s);

-- name: execution_event_list
SELECT ev.execution_id, ev.kind, ev.at, ev.detail
FROM execution_events ev JOIN executions e ON e.execution_id = ev.execution_id
WHERE e.tenant = %(tenant)s AND ev.execution_id = %(execution_id)s
ORDER BY ev.event_id;

-- name: attempt_list
SELECT a.* FROM attempts a JOIN executions e ON e.execution_id = a.execution_id
WHERE e.tenant = %(tenant)s AND a.execution_id = %(execution_id)s
ORDER BY a.attempt_number;

-- name: fencing_token_next
-- One token per claimed execution. The sequence is shared by every claimer and never goes
-- back, so a later claim of an execution always carries a larger token than any earlier claim
-- of it (the earlier claim committed before the row could be READY again).
SELECT nextval('fencing_token_seq') AS value FROM generate_series(1, %(n)s);

-- name: execution_claim_candidates
-- Served by the executions_ready partial index: no SCHEDULED or finished row is ever visited.
-- SKIP LOCKED: concurrent claimers take disjoint rows instead of queueing behind each other, and
-- a row a cancel has locked is left to the cancel. The locks last until the claim commits.
-- A worker that runs only some definitions names them; NULL means any.
SELECT execution_id FROM executions
WHERE status = 'READY'
  AND (%(definition_uris)s::text[] IS NULL OR definition_uri = ANY(%(definition_uris)s::text[]))
ORDER BY priority DESC, ready_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: execution_claim
-- The candidates are locked by this transaction; the status guard states the transition anyway.
-- Lease times come from the database clock unless the caller passes now (tests).
UPDATE executions e
SET status = 'RUNNING', attempt_count = e.attempt_count + 1, lease_owner = %(worker_id)s,
    lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval,
    fencing_token = c.fencing_token,
    started_at = coalesce(e.started_at, coalesce(%(now)s::timestamptz, now())),
    updated_at = coalesce(%(now)s::timestamptz, now())
FROM unnest(%(execution_ids)s::uuid[], %(fencing_tokens)s::bigint[]) AS c (execution_id, fencing_token)
WHERE e.execution_id = c.execution_id AND e.status = 'READY'
RETURNING e.*;

-- name: attempt_insert
INSERT INTO attempts (execution_id, attempt_number, worker_id, fencing_token, status, started_at)
SELECT a.execution_id, a.attempt_number, %(worker_id)s, a.fencing_token, 'RUNNING',
    coalesce(%(now)s::timestamptz, now())
FROM unnest(%(execution_ids)s::uuid[], %(attempt_numbers)s::integer[], %(fencing_tokens)s::bigint[])
    AS a (execution_id, attempt_number, fencing_token);

-- name: execution_finish_if_token
-- The fencing guard: only the holder of the current token of a RUNNING execution may finish it.
UPDATE executions
SET status = %(status)s::text, output = %(output)s, output_reference = %(output_reference)s,
    error = %(error)s, next_attempt_at = %(next_attempt_at)s, lease_owner = NULL,
    lease_expires_at = NULL,
    finished_at = CASE WHEN %(status)s::text IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
        THEN coalesce(%(now)s::timestamptz, now()) END,
    updated_at = coalesce(%(now)s::timestamptz, now())
WHERE execution_id = %(execution_id)s AND status = 'RUNNING' AND fencing_token = %(fencing_token)s
  -- The reaper's write must lose against a heartbeat that renewed the lease meanwhile: the
  -- heartbeat's UPDATE holds the row lock, and this one re-checks the lease on the new version.
  AND (NOT %(lease_expired_only)s::boolean
       OR lease_expires_at < coalesce(%(now)s::timestamptz, now()))
RETURNING attempt_count, idempotency_key;

-- name: attempt_finish
UPDATE attempts
SET status = %(attempt_status)s, finished_at = coalesce(%(now)s::timestamptz, now()),
    error = %(error)s
WHERE execution_id = %(execution_id)s AND attempt_number = %(attempt_number)s
  AND fencing_token = %(fencing_token)s AND status = 'RUNNING';

-- name: execution_promote_scheduled
-- Through executions_due, probed once per shard of the array (the smallint cast keeps the
-- index usable): each probe reads the entries of past buckets up to now, so the cost follows
-- the due rows, never the future backlog. SKIP LOCKED: two schedulers that briefly both own a
-- shard, or a cancel holding a row, make this skip rows instead of queueing behind them; the
-- row lock re-checks the status on the newest row version, so no row is promoted twice.
WITH due AS MATERIALIZED (
    SELECT execution_id FROM executions
    WHERE status = 'SCHEDULED'
      AND shard_id = ANY (%(shards)s::smallint[])
      AND bucket_start <= coalesce(%(now)s::timestamptz, now())
      AND execute_at <= coalesce(%(now)s::timestamptz, now())
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE executions e
SET status = 'READY', ready_at = coalesce(%(now)s::timestamptz, now()),
    updated_at = coalesce(%(now)s::timestamptz, now())
FROM due
WHERE e.execution_id = due.execution_id AND e.status = 'SCHEDULED';

-- name: execution_promote_retries
-- Through executions_retry_due, oldest first: only retries whose time has come are read.
WITH due AS MATERIALIZED (
    SELECT execution_id FROM executions
    WHERE status = 'RETRY_WAIT' AND next_attempt_at <= coalesce(%(now)s::timestamptz, now())
      AND shard_id = ANY (%(shards)s::smallint[])
    ORDER BY next_attempt_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE executions e
SET status = 'READY', ready_at = coalesce(%(now)s::timestamptz, now()), next_attempt_at = NULL,
    updated_at = coalesce(%(now)s::timestamptz, now())
FROM due
WHERE e.execution_id = due.execution_id AND e.status = 'RETRY_WAIT';

-- name: execution_next_scheduled_at
-- Bounded by the horizon on both index columns, so only the near future is read.
SELECT min(execute_at) AS at FROM executions
WHERE status = 'SCHEDULED'
  AND shard_id = ANY (%(shards)s::smallint[])
  AND bucket_start < %(horizon)s::timestamptz AND execute_at < %(horizon)s::timestamptz;

-- name: execution_next_retry_at
SELECT min(next_attempt_at) AS at FROM executions
WHERE status = 'RETRY_WAIT' AND next_attempt_at < %(horizon)s::timestamptz
  AND shard_id = ANY (%(shards)s::smallint[]);

-- name: execution_heartbeat
-- Only the current token's holder extends the lease; a zombie's heartbeat changes nothing.
UPDATE executions
SET lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval,
    updated_at = coalesce(%(now)s::timestamptz, now())
WHERE execution_id = %(execution_id)s AND status = 'RUNNING' AND fencing_token = %(fencing_token)s;

-- name: execution_lease_expired
-- Through executions_running_lease: only expired leases are read. No lock: the reaper's finish
-- is guarded by the token and by the lease still being expired.
SELECT * FROM executions
WHERE status = 'RUNNING' AND lease_expires_at < coalesce(%(now)s::timestamptz, now())
ORDER BY lease_expires_at
LIMIT %(limit)s;

-- name: execution_release
-- Graceful shutdown: back to READY, and the attempt it gives up does not count against the budget.
UPDATE executions
SET status = 'READY', ready_at = coalesce(%(now)s::timestamptz, now()),
    max_attempts = max_attempts + 1, lease_owner = NULL, lease_expires_at = NULL,
    updated_at = coalesce(%(now)s::timestamptz, now())
WHERE execution_id = %(execution_id)s AND status = 'RUNNING' AND fencing_token = %(fencing_token)s
RETURNING attempt_count;

-- name: execution_reap_batch
-- The reaper's whole batch in one conditional UPDATE: a row moves only while it is still RUNNING
-- under the token the reaper read and its lease is still expired, so a heartbeat that renewed
-- the lease, or another reaper that got there first, wins and this row is left alone.
UPDATE executions e
SET status = b.status, error = b.error, next_attempt_at = b.next_attempt_at,
    lease_owner = NULL, lease_expires_at = NULL,
    finished_at = CASE WHEN b.status = 'FAILED' THEN coalesce(%(now)s::timestamptz, now()) END,
    updated_at = coalesce(%(now)s::timestamptz, now())
FROM unnest(%(execution_ids)s::uuid[], %(fencing_tokens)s::bigint[], %(statuses)s::text[],
            %(errors)s::jsonb[], %(next_attempt_ats)s::timestamptz[])
     AS b (execution_id, fencing_token, status, error, next_attempt_at)
WHERE e.execution_id = b.execution_id AND e.status = 'RUNNING'
  AND e.fencing_token = b.fencing_token
  AND e.lease_expires_at < coalesce(%(now)s::timestamptz, now())
RETURNING e.execution_id, e.attempt_count, e.idempotency_key, b.status;

-- name: attempt_reap_batch
UPDATE attempts a
SET status = b.attempt_status, finished_at = coalesce(%(now)s::timestamptz, now()),
    error = b.error
FROM unnest(%(execution_ids)s::uuid[], %(attempt_numbers)s::int[], %(fencing_tokens)s::bigint[],
            %(attempt_statuses)s::text[], %(errors)s::jsonb[])
     AS b (execution_id, attempt_number, fencing_token, attempt_status, error)
WHERE a.execution_id = b.execution_id AND a.attempt_number = b.attempt_number
  AND a.fencing_token = b.fencing_token AND a.status = 'RUNNING';
