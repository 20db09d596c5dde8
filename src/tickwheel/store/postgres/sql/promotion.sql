-- The scheduler's queries: the due window it loads into its timing wheel, the wheel's firing by
-- id, and the catch-all that walks the due indexes up to now. Every promotion returns the
-- definition of each row it moved, so that the scheduler counts promotions per definition, and
-- its trace context, for its promotion span (docs/tracing.md).

-- name: execution_due_window
-- Each slice's next rows in (executeAt, id) order from its cursor, at most :limit per slice. One
-- probe of executions_due per slice (LATERAL), bounded on both index columns: only the slice's
-- rows are read, never the backlog beyond its end, and the LIMIT stops each probe early (the
-- index gives the order; the id only breaks ties). The slice's ordinal says whose row it is.
-- The slices come as one JSON array of positional arrays (shard, after_at, after_id,
-- bucket_from, until): five typed arrays dumped element by element cost the scheduler more than
-- the query (a herd's hints make hundreds of slices, and the first promotion waited on them).
-- Tenant and priority come with the heap tuple read for the definition: the scheduler opens an
-- instant to the claims only when all its rows share both (engine/scheduler.py, DIRECT_MIN).
-- limited, from the same tuple: at an opened herd's instant the scheduler promotes only those
-- when no pause and no rate limit exists (engine/herds.py, _held_back).
SELECT c.slice, d.execution_id, d.shard_id, d.execute_at, d.tenant, d.definition_uri,
    d.definition_version, d.priority, d.concurrency_limit IS NOT NULL AS limited
FROM (
    SELECT (item ->> 0)::smallint AS shard_id, (item ->> 1)::timestamptz AS after_at,
        (item ->> 2)::uuid AS after_id, (item ->> 3)::timestamptz AS bucket_from,
        (item ->> 4)::timestamptz AS until, slice
    FROM jsonb_array_elements(%(slices)s::jsonb) WITH ORDINALITY AS s (item, slice)
) c
CROSS JOIN LATERAL (
    SELECT e.execution_id, e.shard_id, e.execute_at, e.tenant, e.definition_uri,
        e.definition_version, e.priority, e.concurrency_limit
    FROM executions e
    WHERE e.status = 'SCHEDULED'
      AND e.shard_id = c.shard_id
      AND e.bucket_start >= c.bucket_from AND e.bucket_start <= c.until
      AND e.execute_at >= c.after_at AND e.execute_at <= c.until
      AND (e.execute_at, e.execution_id) > (c.after_at, c.after_id)
    ORDER BY e.bucket_start, e.execute_at, e.execution_id
    LIMIT %(limit)s
) d;

-- name: promotion_idle_timeout
-- The first statement of a leased promotion, before its fence locks the shard rows FOR SHARE
-- until commit. A scheduler frozen inside this transaction (SIGSTOP, a long GC pause) would keep
-- those locks, and a takeover's SKIP LOCKED would pass its shards by for as long as it stays
-- frozen: the database ends such a transaction (and the session) once it sits idle for
-- :timeout. set_config(..., true) is SET LOCAL (this transaction only), but takes a parameter.
SELECT set_config('idle_in_transaction_session_timeout', %(timeout)s, true);

-- name: execution_promote_ids
-- The wheel's firing: the rows it loaded, by primary key. Each is still guarded: SCHEDULED (a
-- cancel or the catch-all may have moved it meanwhile), in a shard the caller may promote, and
-- due by the database's clock, so that a scheduler whose clock runs ahead fires nothing early.
-- SKIP LOCKED and the id order as in execution_promote_scheduled: a row a cancel holds is left
-- to the cancel, and two statements never wait on each other's rows in opposite orders.
-- One probe of the primary key per id, in id order, as in execution_promote_ids_fenced below.
WITH due AS MATERIALIZED (
    SELECT d.execution_id
    FROM (SELECT DISTINCT id FROM unnest(%(execution_ids)s::uuid[]) AS id ORDER BY id) AS i
    CROSS JOIN LATERAL (
        SELECT execution_id FROM executions
        WHERE execution_id = i.id
          AND status = 'SCHEDULED'
          AND shard_id = ANY (%(shards)s::smallint[])
          AND execute_at <= coalesce(%(now)s::timestamptz, now())
        FOR UPDATE SKIP LOCKED
    ) AS d
)
UPDATE executions e
SET status = 'READY', ready_at = coalesce(%(now)s::timestamptz, now()),
    updated_at = coalesce(%(now)s::timestamptz, now())
FROM due
WHERE e.execution_id = due.execution_id  -- locked and re-checked by due (claims.sql says why)
RETURNING e.execution_id, e.definition_uri, e.trace_context;

-- name: execution_promote_ids_fenced
-- The wheel's firing, leased, in one statement and one round trip (autocommit): the fence of
-- shard_lease_fence, the guarded promotion of execution_promote_ids limited to the shards it
-- holds, and the READY notification, delivered at the statement's commit. A transaction of
-- BEGIN, idle timeout, fence, UPDATE, NOTIFY and COMMIT took six round trips before the
-- workers heard of a herd's first rows. The fence works as in its own statement: FOR SHARE
-- re-checks owner, epoch and expiry on each lease row's newest version (a takeover committed
-- after this statement began is seen, and its shards are skipped) and keeps a takeover out
-- until the commit; no transaction stays open between statements, so the idle timeout of the
-- multi-statement promotions has nothing to bound here. Rows come back as held shards
-- (shard_id set) and promoted executions (execution_id set).
-- Each id is one probe of the primary key (a LATERAL subquery with its own row lock is never
-- flattened into a join), in id order (the lock order of every promotion). Written as a join,
-- the planner drove it from the held shards through executions_due, reading every due row of
-- each shard to find the batch's few: a herd of 100,000 has ~100 a shard, and that read was
-- most of a batch of 500 (docs/scaling.md, "The herd's first milliseconds").
-- direct: the instant's shards are open (shard_lease_open), and the rows the plain claim takes
-- as they are (execution_claim_ready_unlimited: no concurrency limit, no pause, no rate limit
-- over them) are left SCHEDULED for it; only the others are promoted now. The scheduler
-- promotes what the claims have not taken a little later (docs/scaling.md, "Claiming a herd
-- without promoting it"). The two tests are each other's complement, read at each statement.
-- held: each grant one probe of the primary key, in shard order, as shard_lease_fence does. As a
-- join, the generic plan this prepared statement keeps, on statistics without the owners (a new
-- database's), was a nested loop of every lease row over every grant of the batch: 261,632
-- comparisons and 50 ms for a firing over 512 shards (docs/scaling.md, "What an idle scheduler
-- costs").
WITH held AS MATERIALIZED (
    SELECT l.shard_id
    FROM (SELECT * FROM unnest(%(shards)s::smallint[], %(epochs)s::bigint[])
                   AS m (shard_id, epoch)
          ORDER BY m.shard_id) AS mine
    CROSS JOIN LATERAL (
        SELECT l.shard_id FROM shard_leases l
        WHERE l.shard_id = mine.shard_id AND l.epoch = mine.epoch AND l.owner = %(owner)s
          AND l.expires_at > coalesce(%(now)s::timestamptz, now())
        FOR SHARE
    ) AS l
    ORDER BY l.shard_id
),
due AS MATERIALIZED (
    SELECT d.execution_id
    FROM (SELECT DISTINCT id FROM unnest(%(execution_ids)s::uuid[]) AS id ORDER BY id) AS i
    CROSS JOIN LATERAL (
        SELECT execution_id FROM executions
        WHERE execution_id = i.id
          AND status = 'SCHEDULED'
          AND shard_id = ANY (ARRAY(SELECT shard_id FROM held))
          AND execute_at <= coalesce(%(now)s::timestamptz, now())
          AND (NOT %(direct)s::boolean OR concurrency_limit IS NOT NULL
               OR (EXISTS (SELECT 1 FROM pauses)
                   AND EXISTS (SELECT 1 FROM pauses p
                               WHERE p.tenant = executions.tenant
                                 AND p.definition_uri IN ('', executions.definition_uri)))
               OR (EXISTS (SELECT 1 FROM rate_limits)
                   AND EXISTS (SELECT 1 FROM rate_limits r
                               WHERE r.tenant = executions.tenant
                                 AND r.definition_uri IN ('', executions.definition_uri))))
        FOR UPDATE SKIP LOCKED
    ) AS d
),
moved AS (
    UPDATE executions e
    SET status = 'READY', ready_at = coalesce(%(now)s::timestamptz, now()),
        updated_at = coalesce(%(now)s::timestamptz, now())
    FROM due
    WHERE e.execution_id = due.execution_id  -- locked and re-checked by due
    RETURNING e.execution_id, e.definition_uri, e.trace_context
),
notified AS (
    SELECT pg_notify(%(channel)s, %(payload)s) WHERE EXISTS (SELECT 1 FROM moved)
)
SELECT h.shard_id, NULL::uuid AS execution_id, NULL::text AS definition_uri,
    NULL::jsonb AS trace_context, (SELECT count(*) FROM notified) AS notifications
FROM held h
UNION ALL
SELECT NULL, m.execution_id, m.definition_uri, m.trace_context, 0 FROM moved m;

-- name: execution_promote_scheduled
-- The catch-all. Through executions_due, probed once per shard of the array (the smallint cast
-- keeps the index usable): each probe reads the entries of past buckets up to now, so the cost
-- follows the due rows, never the future backlog. SKIP LOCKED: two schedulers that briefly both
-- own a shard, or a cancel holding a row, make this skip rows instead of queueing behind them;
-- the row lock re-checks the status on the newest row version, so no row is promoted twice.
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
WHERE e.execution_id = due.execution_id  -- locked and re-checked by due (claims.sql says why)
RETURNING e.execution_id, e.definition_uri, e.trace_context;

-- name: execution_promote_retries
-- Through executions_retry_due, oldest first: only retries whose time has come are read.
-- A retry keeps its ready_at (when the execution first became READY; claims order by it): it
-- takes its place in the queue back once due, instead of going behind every execution that
-- became READY while it ran and waited (a lost lease alone costs a lease's length). Its backoff
-- is served in RETRY_WAIT; ready_at is only an order among rows that are due. NULL (never READY
-- before: not a row a claim made) falls back to its due time.
WITH due AS MATERIALIZED (
    SELECT execution_id FROM executions
    WHERE status = 'RETRY_WAIT' AND next_attempt_at <= coalesce(%(now)s::timestamptz, now())
      AND shard_id = ANY (%(shards)s::smallint[])
    ORDER BY next_attempt_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE executions e
SET status = 'READY', ready_at = coalesce(e.ready_at, e.next_attempt_at), next_attempt_at = NULL,
    updated_at = coalesce(%(now)s::timestamptz, now())
FROM due
WHERE e.execution_id = due.execution_id  -- locked and re-checked by due (claims.sql says why)
RETURNING e.execution_id, e.definition_uri, e.trace_context;

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
