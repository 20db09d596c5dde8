-- Claims that take due SCHEDULED rows directly (issue 13, docs/scaling.md "Claiming a herd
-- without promoting it"). A herd's promotion rewrote every row (SCHEDULED -> READY, ~30-70 us a
-- row with its index entries and WAL) before any of it could be claimed: 100,000 due at one
-- instant were all READY only 7-18 s later.
--
-- due_through: the instant up to which the shard's due SCHEDULED rows may be claimed as they
-- are, straight to RUNNING, by the plain claim (execution_claim_ready_unlimited). Only the
-- shard's lease holder sets it (shard_lease_open), fenced by owner, epoch and expiry in the same
-- UPDATE, and never past the database's clock; it clears it (shard_lease_close, or a catch-all
-- that promoted everything due in the shard) once what it opened has been claimed or promoted.
-- NULL: closed, the usual state.
ALTER TABLE shard_leases ADD COLUMN due_through timestamptz;

-- The open shards, which every plain claim reads: empty but for the moments after an instant
-- with due executions, so a claim between herds reads one empty index page, not 1,024 rows.
CREATE INDEX shard_leases_open ON shard_leases (shard_id, due_through)
    WHERE due_through IS NOT NULL;

-- Statistics that see the column (all NULL): without them the planner takes a shard as open
-- with the default selectivity and reads the 1,024 rows instead of the partial index.
ANALYZE shard_leases;
