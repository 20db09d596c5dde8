-- Running work (issue 14): cancel requests, heartbeats that carry progress and checkpoints, and
-- snoozes. Every worker write is fenced by its token, like any other.

-- name: execution_cancel_request
-- Only a RUNNING execution: the worker holding it stops it. Repeating the request keeps the first
-- instant; prior_requested_at says whether this call made it (the history records it once).
WITH prior AS MATERIALIZED (
    SELECT execution_id, cancel_requested_at FROM executions
    WHERE tenant = %(tenant)s AND execution_id = %(execution_id)s
    FOR UPDATE
)
UPDATE executions e
SET cancel_requested_at = coalesce(e.cancel_requested_at, %(now)s::timestamptz),
    updated_at = %(now)s::timestamptz
FROM prior
WHERE e.execution_id = prior.execution_id AND e.status = 'RUNNING'
RETURNING e.*, prior.cancel_requested_at AS prior_requested_at;

-- name: execution_beat
-- The heartbeat: only the current token's holder extends the lease (a zombie's changes nothing),
-- and writes the handler's latest progress and checkpoint when it has new ones (NULL: unchanged).
-- The answer carries the cancel request, so hearing it costs no round trip of its own.
UPDATE executions
SET lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval,
    updated_at = coalesce(%(now)s::timestamptz, now()),
    progress = coalesce(%(progress)s::jsonb, progress),
    checkpoint = coalesce(%(checkpoint)s::jsonb, checkpoint)
WHERE execution_id = %(execution_id)s AND status = 'RUNNING' AND fencing_token = %(fencing_token)s
RETURNING cancel_requested_at;

-- name: execution_snooze
-- The handler asked to run again later: RETRY_WAIT until then, and the attempt it used is given
-- back to the budget (as a release gives it back), so a snooze never turns into a dead letter.
UPDATE executions
SET status = 'RETRY_WAIT', next_attempt_at = %(until)s::timestamptz,
    max_attempts = max_attempts + 1, lease_owner = NULL, lease_expires_at = NULL,
    updated_at = coalesce(%(now)s::timestamptz, now())
WHERE execution_id = %(execution_id)s AND status = 'RUNNING' AND fencing_token = %(fencing_token)s
RETURNING attempt_count;
