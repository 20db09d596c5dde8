-- Claims that take due SCHEDULED rows directly (issue 13, docs/scaling.md "Claiming a herd
-- without promoting it"), as on PostgreSQL's migration 0022: due_through is the instant up to
-- which the shard's due SCHEDULED rows may be claimed straight to RUNNING by the plain claim.
-- Only the shard's lease holder sets it, fenced by owner, epoch and expiry; NULL: closed.
ALTER TABLE shard_leases ADD COLUMN due_through INTEGER;

CREATE INDEX shard_leases_open ON shard_leases (shard_id, due_through)
    WHERE due_through IS NOT NULL;
