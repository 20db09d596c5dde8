-- Pauses and circuit breakers (issue 14). The claim statement reads `pauses` in one clause
-- (claims.sql); these write it. Manual pauses and breakers' pauses are separate rows.

-- name: flow_controls_present
-- Whether any pause (manual or a breaker's) or rate limit exists: the scheduler then promotes a
-- whole opened herd by id at its instant (the promotion picks out what these hold back); with
-- none, only the rows under a concurrency limit (engine/herds.py, _held_back).
SELECT EXISTS (SELECT 1 FROM pauses) OR EXISTS (SELECT 1 FROM rate_limits) AS present;

-- name: pause_set
-- A second pause of the same thing keeps the first (its instant and reason).
INSERT INTO pauses (tenant, definition_uri, kind, reason, paused_at)
VALUES (%(tenant)s, %(definition_uri)s, 'manual', %(reason)s, %(now)s)
ON CONFLICT (tenant, definition_uri, kind) DO NOTHING;

-- name: pause_get
SELECT tenant, definition_uri, kind, reason, paused_at, probe_execution_id
FROM pauses
WHERE tenant = %(tenant)s AND definition_uri = %(definition_uri)s AND kind = %(kind)s;

-- name: pause_clear
DELETE FROM pauses
WHERE tenant = %(tenant)s AND definition_uri = %(definition_uri)s AND kind = 'manual';

-- name: pause_list
SELECT tenant, definition_uri, kind, reason, paused_at, probe_execution_id
FROM pauses
WHERE tenant = %(tenant)s
ORDER BY definition_uri, kind;

-- name: pause_breaker_put
-- The breaker opened (again): its pause, with no probe.
INSERT INTO pauses (tenant, definition_uri, kind, reason, paused_at)
VALUES (%(tenant)s, %(definition_uri)s, 'breaker', %(reason)s, %(now)s)
ON CONFLICT (tenant, definition_uri, kind)
DO UPDATE SET reason = EXCLUDED.reason, paused_at = EXCLUDED.paused_at, probe_execution_id = NULL;

-- name: pause_breaker_probe
UPDATE pauses SET probe_execution_id = %(probe_execution_id)s
WHERE tenant = %(tenant)s AND definition_uri = %(definition_uri)s AND kind = 'breaker';

-- name: pause_breaker_clear
DELETE FROM pauses
WHERE tenant = %(tenant)s AND definition_uri = %(definition_uri)s AND kind = 'breaker';

-- name: circuit_breaker_lock
-- The breaker's row, made closed at the first attempt, locked for the rest of the transaction:
-- the no-op update on conflict takes the row lock and returns the row in one statement, so two
-- workers finishing attempts of one definition count one after the other.
INSERT INTO circuit_breakers (tenant, definition_uri, state, consecutive_failures, recent,
                              updated_at)
VALUES (%(tenant)s, %(definition_uri)s, 'closed', 0, '', %(now)s)
ON CONFLICT (tenant, definition_uri) DO UPDATE SET updated_at = circuit_breakers.updated_at
RETURNING tenant, definition_uri, state, consecutive_failures, recent, cool_down_until,
    probe_execution_id, updated_at;

-- name: circuit_breaker_put
UPDATE circuit_breakers
SET state = %(state)s, consecutive_failures = %(consecutive_failures)s, recent = %(recent)s,
    cool_down_until = %(cool_down_until)s, probe_execution_id = %(probe_execution_id)s,
    updated_at = %(now)s
WHERE tenant = %(tenant)s AND definition_uri = %(definition_uri)s;

-- name: circuit_breaker_transition_insert
INSERT INTO circuit_breaker_transitions (tenant, definition_uri, from_state, to_state, reason, at)
VALUES (%(tenant)s, %(definition_uri)s, %(from_state)s, %(to_state)s, %(reason)s, %(now)s);

-- name: circuit_breaker_probe_due
-- Breakers that need a probe: OPEN past the cool-down, or HALF_OPEN whose probe can no longer
-- run (it was cancelled, or dead-lettered by the reaper, so no attempt of it will report).
-- Locked and skipped by concurrent sweeps: each breaker moves once.
SELECT b.tenant, b.definition_uri, b.state, b.consecutive_failures, b.recent, b.cool_down_until,
    b.probe_execution_id, b.updated_at, coalesce(%(now)s::timestamptz, now()) AS at
FROM circuit_breakers b
WHERE b.state <> 'closed'
  AND ((b.state = 'open' AND b.cool_down_until <= coalesce(%(now)s::timestamptz, now()))
       OR (b.state = 'half_open' AND NOT EXISTS (
           SELECT 1 FROM executions e
           WHERE e.execution_id = b.probe_execution_id
             AND e.status IN ('READY', 'RUNNING', 'RETRY_WAIT'))))
ORDER BY b.cool_down_until
LIMIT 100
FOR UPDATE OF b SKIP LOCKED;

-- name: flow_passes_due
-- Whether the breakers' probe and the expiry would find anything, in one read: the scheduler
-- that runs the passes asks this every second and runs a pass only when it has work (an idle
-- system's passes were two statements a second, one of them a write transaction on SQLite).
-- Each EXISTS is the pass's own WHERE clause over its partial index.
SELECT EXISTS (
           SELECT 1 FROM circuit_breakers b
           WHERE b.state <> 'closed'
             AND ((b.state = 'open' AND b.cool_down_until <= coalesce(%(now)s::timestamptz, now()))
                  OR (b.state = 'half_open' AND NOT EXISTS (
                      SELECT 1 FROM executions e
                      WHERE e.execution_id = b.probe_execution_id
                        AND e.status IN ('READY', 'RUNNING', 'RETRY_WAIT'))))) AS breakers,
       EXISTS (
           SELECT 1 FROM executions
           WHERE status IN ('SCHEDULED', 'READY') AND started_at IS NULL
             AND start_by IS NOT NULL AND start_by < coalesce(%(now)s::timestamptz, now()))
       OR EXISTS (
           SELECT 1 FROM executions
           WHERE status IN ('SCHEDULED', 'READY') AND started_at IS NULL
             AND deadline IS NOT NULL AND deadline < coalesce(%(now)s::timestamptz, now())) AS expiry;

-- name: circuit_breaker_probe_pick
-- The first READY execution of the definition in claim order: the probe.
SELECT execution_id FROM executions
WHERE status = 'READY' AND tenant = %(tenant)s AND definition_uri = %(definition_uri)s
ORDER BY priority DESC, ready_at
LIMIT 1;

-- name: circuit_breaker_list
SELECT tenant, definition_uri, state, consecutive_failures, recent, cool_down_until,
    probe_execution_id, updated_at
FROM circuit_breakers
WHERE tenant = %(tenant)s
ORDER BY definition_uri;

-- name: circuit_breaker_transitions
SELECT tenant, definition_uri, from_state, to_state, reason, at
FROM circuit_breaker_transitions
WHERE tenant = %(tenant)s AND definition_uri = %(definition_uri)s
ORDER BY transition_id DESC
LIMIT %(limit)s;

-- name: circuit_breaker_counts
SELECT state, count(*) AS n FROM circuit_breakers GROUP BY state;

-- Deadlines (docs/flow-control.md): executions that never started by their startBy, or by their
-- deadline, end EXPIRED. Read through the two partial indexes of unstarted executions with a
-- limit (executions_start_by, executions_deadline); locked rows are skipped (a claim or a cancel
-- has them; the claim's worker checks the limit itself).

-- name: execution_expire_due
WITH due AS (
    SELECT execution_id, status FROM executions
    WHERE status IN ('SCHEDULED', 'READY') AND started_at IS NULL
      AND ((start_by IS NOT NULL AND start_by < coalesce(%(now)s::timestamptz, now()))
           OR (deadline IS NOT NULL AND deadline < coalesce(%(now)s::timestamptz, now())))
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
expired AS (
    UPDATE executions e
    SET status = 'EXPIRED', finished_at = coalesce(%(now)s::timestamptz, now()),
        updated_at = coalesce(%(now)s::timestamptz, now()), next_attempt_at = NULL,
        error = jsonb_build_object(
            'kind', 'expired',
            'message', CASE
                WHEN e.start_by IS NOT NULL AND e.start_by < coalesce(%(now)s::timestamptz, now())
                THEN 'not started by its startBy'
                ELSE 'not started by its deadline' END,
            'startBy', e.start_by, 'deadline', e.deadline)
    FROM due
    WHERE e.execution_id = due.execution_id
    RETURNING e.*
),
recorded AS (
    INSERT INTO execution_events (execution_id, kind, at, detail)
    SELECT x.execution_id, 'expired', coalesce(%(now)s::timestamptz, now()),
        jsonb_build_object('fromStatus', due.status, 'startBy', x.start_by,
                           'deadline', x.deadline)
    FROM expired x JOIN due ON due.execution_id = x.execution_id
)
SELECT * FROM expired;

-- name: execution_expire_claimed
-- Claimed after its startBy (the claim raced the sweep): not run. The worker's write, fenced
-- like a result: only the holder of the current token of a RUNNING execution. A concurrency
-- slot it held is free now: the workers are woken (their idle poll is long while they hear).
WITH expired AS (
    UPDATE executions
    SET status = 'EXPIRED', finished_at = coalesce(%(now)s::timestamptz, now()),
        updated_at = coalesce(%(now)s::timestamptz, now()), lease_owner = NULL,
        lease_expires_at = NULL, error = %(error)s
    WHERE execution_id = %(execution_id)s AND status = 'RUNNING'
      AND fencing_token = %(fencing_token)s
    RETURNING execution_id, attempt_count, concurrency_limit
),
attempt AS (
    UPDATE attempts a
    SET status = 'ABANDONED', finished_at = coalesce(%(now)s::timestamptz, now()),
        error = %(error)s
    FROM expired x
    WHERE a.execution_id = x.execution_id AND a.attempt_number = x.attempt_count
      AND a.fencing_token = %(fencing_token)s AND a.status = 'RUNNING'
),
recorded AS (
    INSERT INTO execution_events (execution_id, kind, at, detail)
    SELECT execution_id, 'expired', coalesce(%(now)s::timestamptz, now()),
        jsonb_build_object('fromStatus', 'RUNNING')
    FROM expired
),
woken AS (
    SELECT pg_notify(%(ready_channel)s, %(origin)s)
    WHERE EXISTS (SELECT 1 FROM expired WHERE concurrency_limit IS NOT NULL)
)
SELECT count(*) AS n, (SELECT count(*) FROM woken) AS woken FROM expired;
