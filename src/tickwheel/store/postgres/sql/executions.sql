-- name: execution_insert
-- The whole batch in one statement, one round trip and one commit (the pool's connections are
-- autocommit). The items come as one JSON array of positional arrays (rows.insert_items gives
-- the order), and what they all have in common once (shared): two parameters whatever the
-- batch size, encoded by the C JSON encoder, where 14 typed arrays cost the client more than
-- the insert costs the server. (A binary COPY of new keys after a read of the taken ones cost
-- the server less per row, but its six round trips lost more where a process serves several
-- batches at once: docs/scaling.md, "The batch insert's server time".)
-- The insert itself is tickwheel_execution_insert (migration 0024): the batch inserted plainly,
-- and again with ON CONFLICT DO NOTHING only when a key is taken (its unique_violation caught
-- there, never logged). Either way a competing, uncommitted insert of the same key is waited
-- for and the key then skipped, so concurrent identical submissions create one row. Rows go in
-- in the array's order, which the store sorts by (tenant, key) in Python (rows.lock_order, code
-- point order, the same for every insert path): two batches that share keys then wait on each
-- other in the same order and cannot deadlock, and among duplicates inside the batch the
-- earliest item is the one inserted (the sort is stable). No conflict target: on a partitioned
-- table (docs/scaling.md) the key's uniqueness is execution_keys', claimed by a trigger that
-- skips the row the same way, and no unique index on executions could name it.
-- Only the ids come back: the store knows the rest of each row it inserted.
-- The wake-ups ride in the same statement: one pg_notify per (channel, payload) whose status
-- some inserted row has (delivered at the commit, never for a row not inserted). The scalar
-- subquery runs once, when the first row is returned: with no row inserted nothing is sent.
WITH inserted AS MATERIALIZED (
    SELECT inserted_id AS execution_id, inserted_status AS status
    FROM tickwheel_execution_insert(%(shared)s::jsonb, %(items)s::jsonb)
),
notified AS (
    SELECT pg_notify(signal.channel, signal.payload)
    FROM jsonb_to_recordset(%(notify)s::jsonb) AS signal (channel text, payload text, status text)
    WHERE EXISTS (SELECT 1 FROM inserted WHERE inserted.status = signal.status)
)
SELECT inserted.execution_id, (SELECT count(*) FROM notified) AS notifications FROM inserted;

-- name: execution_insert_one
-- execution_insert for a single submission: each column its own parameter, sent as text and
-- cast once (rows.insert_items), no JSON row to parse and unpack (jsonb_in, twenty ->> and
-- five casts of a row's fields cost the server about a tenth of a single submission). The
-- wake-up rides in it as in the batch's.
WITH inserted AS (
    INSERT INTO executions (
        execution_id, tenant, definition_uri, definition_version, input_snapshot, execute_at,
        bucket_start, shard_id, idempotency_key, request_fingerprint, status, priority,
        attempt_count, max_attempts, ready_at, created_at, updated_at, trace_context,
        start_by, deadline, concurrency_key, concurrency_limit, concurrency_order
    )
    VALUES (
        %(execution_id)s::uuid, %(tenant)s::text, %(definition_uri)s::text,
        %(definition_version)s::integer, %(inputs)s::jsonb, %(execute_at)s::timestamptz,
        %(bucket_start)s::timestamptz, %(shard_id)s::smallint, %(idempotency_key)s::text,
        %(request_fingerprint)s::text, %(status)s::text, %(priority)s::integer,
        0, %(max_attempts)s::integer,
        CASE WHEN %(status)s::text = 'READY' THEN %(created_at)s::timestamptz END,
        %(created_at)s::timestamptz, %(created_at)s::timestamptz, %(trace_context)s::jsonb,
        %(start_by)s::timestamptz, %(deadline)s::timestamptz,
        %(concurrency_key)s::text, %(concurrency_limit)s::integer, %(concurrency_order)s::text
    )
    ON CONFLICT DO NOTHING
    RETURNING execution_id, status
),
notified AS (
    SELECT pg_notify(signal.channel, signal.payload)
    FROM jsonb_to_recordset(%(notify)s::jsonb) AS signal (channel text, payload text, status text)
    WHERE EXISTS (SELECT 1 FROM inserted WHERE inserted.status = signal.status)
)
SELECT inserted.execution_id, (SELECT count(*) FROM notified) AS notifications FROM inserted;

-- name: execution_get_by_key
-- The executions holding any of the given (tenant, key) pairs (rows.key_pairs: one JSON array
-- of [tenant, key] arrays; psycopg writes a text[] element by element in Python). One probe of
-- the (tenant, idempotency_key) index per pair whatever the table's size or statistics (the
-- LIMIT keeps each pair a lookup of its own; a key is held once at most): an IN list was
-- planned over a small or unanalysed table as a hash join over a scan of every row (7 ms for
-- 1,000 pairs over 20,000 rows, against 1.7 ms by the index).
SELECT e.* FROM jsonb_array_elements(%(pairs)s::jsonb) AS pair (item)
CROSS JOIN LATERAL (
    SELECT * FROM executions
    WHERE executions.tenant = pair.item ->> 0 AND executions.idempotency_key = pair.item ->> 1
    LIMIT 1
) AS e;

-- name: execution_get
SELECT * FROM executions WHERE tenant = %(tenant)s AND execution_id = %(execution_id)s;

-- name: execution_list
-- With a definition filter (executions_tenant_definition, newest first); without one the store
-- reads execution_list_merged. Optional filters are NULL when unused.
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

-- name: execution_list_merged
-- A tenant's executions newest first, without a definition filter: one page of each status
-- asked for (all of them when unfiltered), each read in order from executions_tenant_status
-- (tenant, status, execution_id), merged by execution_id. No listing index is then written at a
-- status change but that one (migration 0021 dropped (tenant, execution_id)), and a status filter
-- is read in order too, not sorted. The store (postgres/store.py) puts in the pages: one
-- execution_list_status_page per status asked for, joined by UNION ALL, so none is planned that
-- is not read (a page behind a false one-time filter was still planned, and for a large tenant
-- as part of a parallel plan whose workers started: 32 ms). scoped is inlined into every page,
-- with its status test. Optional filters are NULL when unused.
WITH scoped AS NOT MATERIALIZED (
    SELECT * FROM executions
    WHERE tenant = %(tenant)s
      AND (%(before)s::uuid IS NULL OR execution_id < %(before)s::uuid)
      AND (%(idempotency_key)s::text IS NULL OR idempotency_key = %(idempotency_key)s::text)
      -- A prefix: LIKE with the pattern's metacharacters escaped by the store (exact in any
      -- collation); rows are read in the tenant's execution_id order and filtered.
      AND (%(key_like)s::text IS NULL OR idempotency_key LIKE %(key_like)s::text ESCAPE '\')
      AND (%(execute_from)s::timestamptz IS NULL OR execute_at >= %(execute_from)s::timestamptz)
      AND (%(execute_to)s::timestamptz IS NULL OR execute_at < %(execute_to)s::timestamptz)
)
SELECT * FROM ({pages}) AS page
ORDER BY execution_id DESC
LIMIT %(limit)s;

-- name: execution_list_status_page
-- One status's page of execution_list_merged (the status quoted by the store).
(SELECT * FROM scoped WHERE status = {status} ORDER BY execution_id DESC LIMIT %(limit)s)

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

-- name: execution_cancel_unstarted
-- Like execution_cancel, but only an execution that never started: a paused cron job's
-- occurrences that are waiting for their time or for a worker.
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
  AND e.status IN ('SCHEDULED', 'READY')
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
SET status = 'READY', max_attempts = e.attempt_count + %(max_attempts)s, cancel_requested_at = NULL,
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

-- name: execution_lease_next
-- How long until the reaper would find an expired lease (negative: it would now; NULL: nothing
-- runs). The reaper sleeps that long, within its bounds, rather than asking every second: the
-- first entry of executions_running_lease.
SELECT min(lease_expires_at) - coalesce(%(now)s::timestamptz, now()) AS wait
FROM executions
WHERE status = 'RUNNING';

-- name: execution_release
-- Graceful shutdown: back to READY, and the attempt it gives up does not count against the budget.
-- It keeps its ready_at, so its place in the claim order (promotion.sql says why).
UPDATE executions
SET status = 'READY', ready_at = coalesce(ready_at, coalesce(%(now)s::timestamptz, now())),
    max_attempts = max_attempts + 1, lease_owner = NULL, lease_expires_at = NULL,
    updated_at = coalesce(%(now)s::timestamptz, now())
WHERE execution_id = %(execution_id)s AND status = 'RUNNING' AND fencing_token = %(fencing_token)s
RETURNING attempt_count;

-- name: execution_reap_batch
-- The reaper's whole batch in one conditional UPDATE: a row moves only while it is still RUNNING
-- under the token the reaper read and its lease is still expired, so a heartbeat that renewed
-- the lease, or another reaper that got there first, wins and this row is left alone.
-- A lost attempt is counted apart from the handler's own failures (domain/retry.py): one that
-- is retried is given back to the budget, as a release gives it back.
-- The status guard in the "C" collation, as in execution_finish_many (claims.sql says why): the
-- main pool's sessions keep a generic plan after five custom ones when it looks no dearer, and
-- the one made on a new table (3,000 rows, never analyzed) read the batch through a bitmap of
-- executions_running_lease, every RUNNING row: 2,000 for a batch of 16.
-- frees_slot: the row held a concurrency slot, free now (the caller wakes the workers).
UPDATE executions e
SET status = b.status, error = b.error, next_attempt_at = b.next_attempt_at,
    max_attempts = e.max_attempts + CASE WHEN b.status = 'RETRY_WAIT' THEN 1 ELSE 0 END,
    lease_owner = NULL, lease_expires_at = NULL,
    finished_at = CASE WHEN b.status IN ('FAILED', 'CANCELLED')
        THEN coalesce(%(now)s::timestamptz, now()) END,
    updated_at = coalesce(%(now)s::timestamptz, now())
FROM unnest(%(execution_ids)s::uuid[], %(fencing_tokens)s::bigint[], %(statuses)s::text[],
            %(errors)s::jsonb[], %(next_attempt_ats)s::timestamptz[])
     AS b (execution_id, fencing_token, status, error, next_attempt_at)
WHERE e.execution_id = b.execution_id AND e.status = 'RUNNING' COLLATE "C"
  AND e.fencing_token = b.fencing_token
  AND e.lease_expires_at < coalesce(%(now)s::timestamptz, now())
RETURNING e.execution_id, e.attempt_count, e.idempotency_key, b.status,
    e.concurrency_limit IS NOT NULL AS frees_slot;

-- name: attempt_count_lost
-- Per execution, its attempts lost to a worker's death (the reaper's ABANDONED, kind "lost"; a
-- release is not one) since it was last replayed: a replay gives a fresh budget of both kinds.
-- Through the attempts' primary key and the events' (execution_id, event_id) index.
SELECT a.execution_id, count(*) AS n
FROM attempts a
WHERE a.execution_id = ANY (%(execution_ids)s::uuid[])
  AND a.status = 'ABANDONED' AND a.error ->> 'kind' = 'lost'
  AND a.attempt_number > coalesce((
      SELECT (ev.detail ->> 'attemptCount')::integer FROM execution_events ev
      WHERE ev.execution_id = a.execution_id AND ev.kind = 'replayed'
      ORDER BY ev.event_id DESC
      LIMIT 1
  ), 0)
GROUP BY a.execution_id;

-- name: attempt_reap_batch
UPDATE attempts a
SET status = b.attempt_status, finished_at = coalesce(%(now)s::timestamptz, now()),
    error = b.error
FROM unnest(%(execution_ids)s::uuid[], %(attempt_numbers)s::int[], %(fencing_tokens)s::bigint[],
            %(attempt_statuses)s::text[], %(errors)s::jsonb[])
     AS b (execution_id, attempt_number, fencing_token, attempt_status, error)
WHERE a.execution_id = b.execution_id AND a.attempt_number = b.attempt_number
  AND a.fencing_token = b.fencing_token AND a.status = 'RUNNING';
