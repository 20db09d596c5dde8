-- Running work (issue 14): cancel requests, heartbeats that carry progress and checkpoints, and
-- snoozes. Every worker write is fenced by its token, like any other.

-- name: execution_cancel_request
-- Only a RUNNING execution (the write lock is held: no claim or finish in between). Repeating
-- the request keeps the first instant.
UPDATE executions
SET cancel_requested_at = coalesce(cancel_requested_at, :now), updated_at = :now
WHERE tenant = :tenant AND execution_id = :execution_id AND status = 'RUNNING'
RETURNING *;

-- name: execution_beat
-- The heartbeat: only the current token's holder extends the lease, and writes the handler's
-- latest progress and checkpoint when it has new ones (NULL: unchanged). The answer carries the
-- cancel request.
UPDATE executions
SET lease_expires_at = :lease_expires_at, updated_at = :now,
    progress = coalesce(:progress, progress), checkpoint = coalesce(:checkpoint, checkpoint)
WHERE execution_id = :execution_id AND status = 'RUNNING' AND fencing_token = :fencing_token
RETURNING cancel_requested_at;

-- name: execution_snooze
-- RETRY_WAIT until :until; the attempt used is given back to the budget.
UPDATE executions
SET status = 'RETRY_WAIT', next_attempt_at = :until, max_attempts = max_attempts + 1,
    lease_owner = NULL, lease_expires_at = NULL, updated_at = :now
WHERE execution_id = :execution_id AND status = 'RUNNING' AND fencing_token = :fencing_token
RETURNING attempt_count;
