-- Fragments (store/sqlfile.py): text the statements share, taken in where a line says
-- `-- include: <fragment>`; each statement is still prepared and planned alone.
-- grants_still_held: the grants' lease rows still held by the owner (same owner, same epoch, not
--   expired), each found by one probe of the primary key, in shard order: a LATERAL subquery
--   (with a row lock, the lock's re-check on the newest version included) is never flattened
--   into a join. The includer may add conditions and a lock, then closes it with ") AS l". As a
--   join, a generic plan on statistics taken before any lease had an owner (the migration
--   analyzes the table before then) is a nested loop of every lease row over every grant.

-- name: shard_owner_touch
-- The owner's membership, renewed with its leases (see shard_owners in 0007).
-- include: owner_touched
;

-- name: shard_owner_leave
DELETE FROM shard_owners WHERE owner = %(owner)s;

-- name: shard_lease_acquire
-- Free or expired shards, lowest first. SKIP LOCKED: schedulers acquiring at once each take
-- different rows instead of queueing; the row lock re-checks the WHERE on the newest version, so
-- a shard renewed (or taken) meanwhile is not taken again. Every grant is a new epoch, which
-- fences whoever held the shard before (including this owner's own expired grant).
WITH free AS MATERIALIZED (
    SELECT shard_id FROM shard_leases
    WHERE owner IS NULL OR expires_at <= coalesce(%(now)s::timestamptz, now())
    ORDER BY shard_id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE shard_leases l
SET owner = %(owner)s, epoch = l.epoch + 1,
    expires_at = coalesce(%(now)s::timestamptz, now()) + %(ttl)s::interval,
    updated_at = coalesce(%(now)s::timestamptz, now())
FROM free
WHERE l.shard_id = free.shard_id
RETURNING l.shard_id, l.owner, l.epoch, l.expires_at, l.watermark;

-- name: shard_lease_renew
-- Only grants still held: same owner, same epoch, not expired. A lease that expired is not
-- renewed even if nobody took it yet: its owner must acquire it again (a new epoch), because
-- another scheduler may have been entitled to it meanwhile.
-- No join: each lease row's granted epoch is read from epoch_of, the grants' epochs indexed by
-- shard_id + 1 (NULL for a shard not granted here), so every plan reads each row once. Joined
-- to unnest(shards, epochs), the generic plan psycopg prepares at a connection's fifth renewal,
-- on a table whose row count was known without column statistics (after a VACUUM, or the
-- rewrite of migration 0025), looped over every grant for every lease row: 1,048,576
-- join-filter comparisons and 150-200 ms a renewal, every third of a lease
-- (tests/store/test_plans_leases.py). A single-table UPDATE: the row lock re-checks all of it
-- on the newest version, as the join did.
-- The owner's membership is renewed by the same statement (its own transaction, autocommit):
-- one round trip instead of BEGIN, the membership, the leases and COMMIT, every third of a
-- lease in every scheduler. Only its owner writes a membership row, so the two tables' locks
-- cannot deadlock with another statement whatever order the statement takes them in.
WITH touched AS (
    -- include: owner_touched
)
UPDATE shard_leases l
SET expires_at = coalesce(%(now)s::timestamptz, now()) + %(ttl)s::interval,
    updated_at = coalesce(%(now)s::timestamptz, now())
WHERE l.shard_id = ANY (%(shards)s::smallint[])
  AND l.epoch = (%(epoch_of)s::bigint[])[l.shard_id + 1] AND l.owner = %(owner)s
  AND l.expires_at > coalesce(%(now)s::timestamptz, now())
RETURNING l.shard_id, l.owner, l.epoch, l.expires_at, l.watermark;

-- name: shard_lease_release
-- Gives the shards back at once (no wait for expiry); the epoch stays, the next grant bumps it.
-- Each row's granted epoch from epoch_of, as in shard_lease_renew.
UPDATE shard_leases l
SET owner = NULL, expires_at = NULL, updated_at = coalesce(%(now)s::timestamptz, now())
WHERE l.shard_id = ANY (%(shards)s::smallint[])
  AND l.epoch = (%(epoch_of)s::bigint[])[l.shard_id + 1] AND l.owner = %(owner)s;

-- name: shard_lease_counts
-- Live owners (members not expired) with how many live leases each holds, zero included.
SELECT o.owner, count(l.shard_id) AS n
FROM shard_owners o
LEFT JOIN shard_leases l
  ON l.owner = o.owner AND l.expires_at > coalesce(%(now)s::timestamptz, now())
WHERE o.expires_at > coalesce(%(now)s::timestamptz, now())
GROUP BY o.owner
ORDER BY o.owner;

-- name: shard_lease_fence
-- The promotion's guard, first statement of its transaction: the shards of the given grants that
-- this owner still holds, by the database's clock. FOR SHARE holds them until the promotion
-- commits: a takeover (FOR UPDATE SKIP LOCKED) skips them meanwhile, and a takeover committed
-- before us makes the re-check on the newest row version fail, so a stale owner moves nothing.
-- Each grant is one probe of the primary key (a LATERAL subquery on its shard): as a plain join,
-- with statistics taken before any lease had an owner (a new database's first minute), the
-- planner estimated this owner's leases at one row and ran a nested loop of every lease row
-- over every grant: 612,000 comparisons and 180 ms for a catch-all over 599 grants in B3.
-- The grants in shard order, so the rows are locked in that order, as the sorted join did.
SELECT l.shard_id
-- include: grants_still_held
    FOR SHARE
) AS l
ORDER BY l.shard_id;

-- name: shard_lease_watermark
-- After a promotion that left nothing due in these shards: promoted up to now. Nothing due is
-- left to the plain claim either, so a shard still open (shard_lease_open) closes.
UPDATE shard_leases
SET watermark = coalesce(%(now)s::timestamptz, now()), due_through = NULL
WHERE shard_id = ANY (%(shards)s::smallint[]) AND owner = %(owner)s;

-- fragment: owner_touched
INSERT INTO shard_owners (owner, expires_at, updated_at)
VALUES (%(owner)s, coalesce(%(now)s::timestamptz, now()) + %(ttl)s::interval,
        coalesce(%(now)s::timestamptz, now()))
ON CONFLICT (owner) DO UPDATE
SET expires_at = excluded.expires_at, updated_at = excluded.updated_at

-- fragment: grants_still_held
FROM (SELECT * FROM unnest(%(shards)s::smallint[], %(epochs)s::bigint[]) AS m (shard_id, epoch)
      ORDER BY m.shard_id) AS mine
CROSS JOIN LATERAL (
    SELECT l.shard_id FROM shard_leases l
    WHERE l.shard_id = mine.shard_id AND l.epoch = mine.epoch AND l.owner = %(owner)s
      AND l.expires_at > coalesce(%(now)s::timestamptz, now())

-- name: shard_lease_open
-- An instant's due executions become claimable as they are (docs/scaling.md, "Claiming a herd
-- without promoting it"): the plain claim takes a shard's SCHEDULED rows up to its due_through.
-- Only grants still held: opening locks each one it moves (grants_still_held, FOR NO KEY
-- UPDATE), and the lock re-checks owner, epoch and expiry on the newest version of the lease row
-- (a takeover committed first bumped the epoch), so a stale holder changes nothing, as its
-- promotions would; the update then takes the locked rows by primary key. Never past the
-- database's clock (a scheduler whose clock runs ahead opens nothing early), and never
-- backwards. held: every grant of the call still held (the READY notification wakes the workers
-- whenever one is, even when its shard was open already); a snapshot read, for the caller's
-- counts only. Both read each grant by one probe: as joins to the grants, a generic plan on a new
-- database's statistics (psycopg prepares at a connection's fifth run) looped over every grant
-- for every lease row, twice: 172 ms to open 512 shards (tests/store/test_plans_leases.py).
WITH held AS MATERIALIZED (
    SELECT l.shard_id
    -- include: grants_still_held
        LIMIT 1  -- (one row by its key) a subquery with a LIMIT is not flattened into a join
    ) AS l
),
opening AS MATERIALIZED (
    SELECT l.shard_id
    -- include: grants_still_held
          AND (l.due_through IS NULL
               OR l.due_through < least(%(through)s::timestamptz,
                                        coalesce(%(now)s::timestamptz, now())))
        FOR NO KEY UPDATE
    ) AS l
),
opened AS (
    UPDATE shard_leases l
    SET due_through = least(%(through)s::timestamptz, coalesce(%(now)s::timestamptz, now()))
    WHERE l.shard_id = ANY (ARRAY(SELECT shard_id FROM opening))
    RETURNING l.shard_id
),
notified AS (
    SELECT pg_notify(%(channel)s, %(payload)s)
    WHERE EXISTS (SELECT 1 FROM held) OR EXISTS (SELECT 1 FROM opened)
)
SELECT h.shard_id, (SELECT count(*) FROM notified) AS notifications
FROM (SELECT shard_id FROM held UNION SELECT shard_id FROM opened) AS h
ORDER BY h.shard_id;

-- name: execution_due_work
-- Whether a leased catch-all over these shards has anything to do: a SCHEDULED or a RETRY_WAIT
-- row due by now in any of them (held or not: a fence then counts what it refuses), or one of
-- this owner's shards open to the claims (shard_lease_watermark closes it). When none, the
-- catch-all takes no lock and writes nothing: an idle scheduler's every round locked each of
-- its lease rows (FOR SHARE) and rewrote each one's watermark, some 2,000 row writes and
-- 140 kB of WAL every few seconds for nothing (docs/scaling.md, "What an idle scheduler
-- costs"). One autocommit statement, before any transaction; a row that falls due or commits
-- after it is the wheel's or the next round's, as after a catch-all that found it not yet due.
SELECT EXISTS (SELECT 1 FROM executions
               WHERE status = 'SCHEDULED' AND shard_id = ANY (%(shards)s::smallint[])
                 AND bucket_start <= coalesce(%(now)s::timestamptz, now())
                 AND execute_at <= coalesce(%(now)s::timestamptz, now()))
    OR EXISTS (SELECT 1 FROM executions
               WHERE status = 'RETRY_WAIT'
                 AND next_attempt_at <= coalesce(%(now)s::timestamptz, now())
                 AND shard_id = ANY (%(shards)s::smallint[]))
    OR EXISTS (SELECT 1 FROM shard_leases
               WHERE shard_id = ANY (%(shards)s::smallint[]) AND owner = %(owner)s
                 AND due_through IS NOT NULL) AS work;

-- name: execution_count_due
-- How many promotions a fence refused: the due rows of the fenced shards, through executions_due.
SELECT count(*) AS n FROM executions
WHERE status = 'SCHEDULED'
  AND shard_id = ANY (%(shards)s::smallint[])
  AND bucket_start <= coalesce(%(now)s::timestamptz, now())
  AND execute_at <= coalesce(%(now)s::timestamptz, now());

-- name: shard_lease_grace
-- A herd's grace check in one statement (docs/scaling.md, "A herd's grace in one statement"):
-- how many SCHEDULED rows due by :through are left in the shards of the grants (held or not),
-- and the close of those where none is left: the plain claim stops taking their SCHEDULED rows
-- (the claims took, or the scheduler promoted, the rows of the instants opened up to :through).
-- The count is one probe of executions_due per shard, and a shard closes on its own count, with
-- no second walk. Fenced like shard_lease_open: a lease row is locked, grant after grant in
-- shard order, only if owner, epoch and expiry hold on its newest version (a takeover committed
-- first bumped the epoch), so a stale holder closes nothing. A shard opened again after
-- :through stays open (its own instant closes it later), and so does one where a SCHEDULED row
-- due by :through is left, even past its due_through (an opening the database's clock held
-- back): the claims still draining it, or a row the promotion skipped while a claim or a cancel
-- held it; the claims may still take it, and the catch-all promotes it and closes the shard
-- (shard_lease_watermark) at the latest. So a closed shard holds nothing due by :through, and
-- the herd's next count skips it. The count and the close share the statement's snapshot: a row
-- a claim holds uncommitted still counts, so no shard closes under a claim that rolls back.
-- counted: per grant, whether its rows are counted whole; a grant not counted is probed for one
-- row left (its n is 0 or 1). Counting every row of a herd's open shards at every grace read all
-- that the claims had not taken yet, 150-500 ms of the database's CPU a second during B3's
-- drain (docs/scaling.md, "A herd's grace counts a sample"); a probe stops at the first row.
-- left: the sum of n (0 for no grant); closed: the shards closed, ascending.
WITH mine AS MATERIALIZED (
    SELECT m.shard_id, m.epoch, d.n
    FROM (SELECT * FROM unnest(%(shards)s::smallint[], %(epochs)s::bigint[],
                               %(counted)s::boolean[]) AS m (shard_id, epoch, counted)
          ORDER BY m.shard_id) AS m
    CROSS JOIN LATERAL (
        SELECT count(*) AS n FROM (
            SELECT FROM executions e
            WHERE e.status = 'SCHEDULED' AND e.shard_id = m.shard_id
              AND e.bucket_start <= %(through)s::timestamptz
              AND e.execute_at <= %(through)s::timestamptz
            LIMIT CASE WHEN m.counted THEN NULL ELSE 1 END
        ) AS r
    ) AS d
),
emptied AS MATERIALIZED (
    SELECT l.shard_id
    FROM mine
    CROSS JOIN LATERAL (
        SELECT l.shard_id FROM shard_leases l
        WHERE l.shard_id = mine.shard_id AND l.epoch = mine.epoch AND l.owner = %(owner)s
          AND l.expires_at > coalesce(%(now)s::timestamptz, now())
          AND l.due_through <= %(through)s::timestamptz
        FOR NO KEY UPDATE
    ) AS l
    WHERE mine.n = 0
),
closed AS (
    UPDATE shard_leases l
    SET due_through = NULL
    FROM emptied
    WHERE l.shard_id = emptied.shard_id
    RETURNING l.shard_id
)
SELECT (SELECT coalesce(sum(n), 0) FROM mine)::bigint AS "left",
       coalesce((SELECT array_agg(shard_id ORDER BY shard_id) FROM closed), '{}') AS closed;
