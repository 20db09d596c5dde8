-- SQLite runs one write transaction at a time (BEGIN IMMEDIATE), so these guards need no row
-- locks: each statement sees the latest committed leases.

-- name: shard_owner_touch
INSERT INTO shard_owners (owner, expires_at, updated_at)
VALUES (:owner, :expires_at, :now)
ON CONFLICT (owner) DO UPDATE
SET expires_at = excluded.expires_at, updated_at = excluded.updated_at;

-- name: shard_owner_leave
DELETE FROM shard_owners WHERE owner = :owner;

-- name: shard_lease_acquire
-- Free or expired shards, lowest first; every grant is a new epoch.
UPDATE shard_leases
SET owner = :owner, epoch = epoch + 1, expires_at = :expires_at, updated_at = :now
WHERE shard_id IN (
    SELECT shard_id FROM shard_leases
    WHERE owner IS NULL OR expires_at <= :now
    ORDER BY shard_id
    LIMIT :limit
)
RETURNING shard_id, owner, epoch, expires_at, watermark;

-- name: shard_lease_renew
-- Only grants still held: same owner, same epoch, not expired (an expired grant is re-acquired).
UPDATE shard_leases
SET expires_at = :expires_at, updated_at = :now
WHERE owner = :owner AND expires_at > :now
  AND EXISTS (
    SELECT 1 FROM json_each(:grants) AS g
    WHERE json_extract(g.value, '$[0]') = shard_leases.shard_id
      AND json_extract(g.value, '$[1]') = shard_leases.epoch
  )
RETURNING shard_id, owner, epoch, expires_at, watermark;

-- name: shard_lease_release
UPDATE shard_leases
SET owner = NULL, expires_at = NULL, updated_at = :now
WHERE owner = :owner
  AND EXISTS (
    SELECT 1 FROM json_each(:grants) AS g
    WHERE json_extract(g.value, '$[0]') = shard_leases.shard_id
      AND json_extract(g.value, '$[1]') = shard_leases.epoch
  );

-- name: shard_lease_counts
SELECT o.owner, count(l.shard_id) AS n
FROM shard_owners o
LEFT JOIN shard_leases l ON l.owner = o.owner AND l.expires_at > :now
WHERE o.expires_at > :now
GROUP BY o.owner
ORDER BY o.owner;

-- name: shard_lease_fence
-- The promotion's guard, inside its write transaction: the grants this owner still holds.
SELECT shard_id FROM shard_leases
WHERE owner = :owner AND expires_at > :now
  AND EXISTS (
    SELECT 1 FROM json_each(:grants) AS g
    WHERE json_extract(g.value, '$[0]') = shard_leases.shard_id
      AND json_extract(g.value, '$[1]') = shard_leases.epoch
  )
ORDER BY shard_id;

-- name: shard_lease_watermark
-- Nothing due is left in these shards, for the claims either: an open shard closes.
UPDATE shard_leases SET watermark = :now, due_through = NULL
WHERE owner = :owner AND shard_id IN (SELECT value FROM json_each(:shards));

-- name: shard_lease_open
-- As on PostgreSQL: the grants still held, opened through :through, never past :now nor
-- backwards. Inside a write transaction with shard_lease_fence (held) before it.
UPDATE shard_leases SET due_through = min(:through, :now)
WHERE owner = :owner AND expires_at > :now
  AND (due_through IS NULL OR due_through < min(:through, :now))
  AND EXISTS (
    SELECT 1 FROM json_each(:grants) AS g
    WHERE json_extract(g.value, '$[0]') = shard_leases.shard_id
      AND json_extract(g.value, '$[1]') = shard_leases.epoch
  );

-- name: shard_lease_close
-- The second half of a grace check (shard_lease_grace), in its write transaction, for the grants
-- counted at 0: closed once opened through :through at most and no SCHEDULED row due by
-- :through is left (the claims may still take one; the catch-all closes it at the latest).
UPDATE shard_leases SET due_through = NULL
WHERE owner = :owner AND expires_at > :now AND due_through <= :through
  AND EXISTS (
    SELECT 1 FROM json_each(:grants) AS g
    WHERE json_extract(g.value, '$[0]') = shard_leases.shard_id
      AND json_extract(g.value, '$[1]') = shard_leases.epoch
  )
  AND NOT EXISTS (
    SELECT 1 FROM executions e
    WHERE e.status = 'SCHEDULED' AND e.shard_id = shard_leases.shard_id
      AND e.bucket_start <= :through AND e.execute_at <= :through
  )
RETURNING shard_id;

-- name: execution_due_work
-- Whether a leased catch-all over these shards has anything to do (PostgreSQL's file says why):
-- a SCHEDULED or RETRY_WAIT row due by :now in any of them, or one of this owner's shards open.
SELECT EXISTS (SELECT 1 FROM executions
               WHERE status = 'SCHEDULED'
                 AND shard_id IN (SELECT value FROM json_each(:shards))
                 AND bucket_start <= :now AND execute_at <= :now)
    OR EXISTS (SELECT 1 FROM executions
               WHERE status = 'RETRY_WAIT' AND next_attempt_at <= :now
                 AND shard_id IN (SELECT value FROM json_each(:shards)))
    OR EXISTS (SELECT 1 FROM shard_leases
               WHERE owner = :owner AND due_through IS NOT NULL
                 AND shard_id IN (SELECT value FROM json_each(:shards))) AS work;

-- name: execution_count_due
SELECT count(*) AS n FROM executions
WHERE status = 'SCHEDULED'
  AND shard_id IN (SELECT value FROM json_each(:shards))
  AND bucket_start <= :now AND execute_at <= :now;

-- name: shard_lease_grace
-- A herd's grace check, its first half: how many SCHEDULED rows due by :through each grant's
-- shard still holds, one probe of executions_due per shard. In the same write transaction
-- shard_lease_close then closes the grants counted at 0 (PostgreSQL does both in one statement).
-- A grant whose third element is false is only probed for one row left (n 0 or 1).
SELECT json_extract(g.value, '$[0]') AS shard_id, json_extract(g.value, '$[1]') AS epoch,
       CASE WHEN json_extract(g.value, '$[2]') THEN
           (SELECT count(*) FROM executions e
            WHERE e.status = 'SCHEDULED' AND e.shard_id = json_extract(g.value, '$[0]')
              AND e.bucket_start <= :through AND e.execute_at <= :through)
       ELSE
           EXISTS (SELECT 1 FROM executions e
                   WHERE e.status = 'SCHEDULED' AND e.shard_id = json_extract(g.value, '$[0]')
                     AND e.bucket_start <= :through AND e.execute_at <= :through)
       END AS n
FROM json_each(:grants) AS g;
