-- Pauses and circuit breakers (issue 14), on SQLite: instants are integer microseconds. The claim statement reads `pauses` in one clause
-- (claims.sql); these write it. Manual pauses and breakers' pauses are separate rows.

-- name: flow_controls_present
-- Whether any pause (manual or a breaker's) or rate limit exists: the scheduler then promotes a
-- whole opened herd by id at its instant (the promotion picks out what these hold back); with
-- none, only the rows under a concurrency limit (engine/herds.py, _held_back).
SELECT EXISTS (SELECT 1 FROM pauses) OR EXISTS (SELECT 1 FROM rate_limits) AS present;

-- name: pause_set
-- A second pause of the same thing keeps the first (its instant and reason).
INSERT INTO pauses (tenant, definition_uri, kind, reason, paused_at)
VALUES (:tenant, :definition_uri, 'manual', :reason, :now)
ON CONFLICT (tenant, definition_uri, kind) DO NOTHING;

-- name: pause_get
SELECT tenant, definition_uri, kind, reason, paused_at, probe_execution_id
FROM pauses
WHERE tenant = :tenant AND definition_uri = :definition_uri AND kind = :kind;

-- name: pause_clear
DELETE FROM pauses
WHERE tenant = :tenant AND definition_uri = :definition_uri AND kind = 'manual';

-- name: pause_list
SELECT tenant, definition_uri, kind, reason, paused_at, probe_execution_id
FROM pauses
WHERE tenant = :tenant
ORDER BY definition_uri, kind;

-- name: pause_breaker_put
-- The breaker opened (again): its pause, with no probe.
INSERT INTO pauses (tenant, definition_uri, kind, reason, paused_at)
VALUES (:tenant, :definition_uri, 'breaker', :reason, :now)
ON CONFLICT (tenant, definition_uri, kind)
DO UPDATE SET reason = EXCLUDED.reason, paused_at = EXCLUDED.paused_at, probe_execution_id = NULL;

-- name: pause_breaker_probe
UPDATE pauses SET probe_execution_id = :probe_execution_id
WHERE tenant = :tenant AND definition_uri = :definition_uri AND kind = 'breaker';

-- name: pause_breaker_clear
DELETE FROM pauses
WHERE tenant = :tenant AND definition_uri = :definition_uri AND kind = 'breaker';

-- name: circuit_breaker_lock
-- The breaker's row, made closed at the first attempt, locked for the rest of the transaction:
-- inside BEGIN IMMEDIATE, so two workers finishing attempts of one definition count one after
-- the other; the no-op update on conflict returns the existing row in the same statement.
INSERT INTO circuit_breakers (tenant, definition_uri, state, consecutive_failures, recent,
                              updated_at)
VALUES (:tenant, :definition_uri, 'closed', 0, '', :now)
ON CONFLICT (tenant, definition_uri) DO UPDATE SET updated_at = circuit_breakers.updated_at
RETURNING tenant, definition_uri, state, consecutive_failures, recent, cool_down_until,
    probe_execution_id, updated_at;

-- name: circuit_breaker_put
UPDATE circuit_breakers
SET state = :state, consecutive_failures = :consecutive_failures, recent = :recent,
    cool_down_until = :cool_down_until, probe_execution_id = :probe_execution_id,
    updated_at = :now
WHERE tenant = :tenant AND definition_uri = :definition_uri;

-- name: circuit_breaker_transition_insert
INSERT INTO circuit_breaker_transitions (tenant, definition_uri, from_state, to_state, reason, at)
VALUES (:tenant, :definition_uri, :from_state, :to_state, :reason, :now);

-- name: circuit_breaker_probe_due
-- Breakers that need a probe: OPEN past the cool-down, or HALF_OPEN whose probe can no longer
-- run (it was cancelled, or dead-lettered by the reaper, so no attempt of it will report).
-- Inside BEGIN IMMEDIATE: one sweep at a time, so each breaker moves once.
SELECT b.tenant, b.definition_uri, b.state, b.consecutive_failures, b.recent, b.cool_down_until,
    b.probe_execution_id, b.updated_at, :now AS at
FROM circuit_breakers b
WHERE b.state <> 'closed'
  AND ((b.state = 'open' AND b.cool_down_until <= :now)
       OR (b.state = 'half_open' AND NOT EXISTS (
           SELECT 1 FROM executions e
           WHERE e.execution_id = b.probe_execution_id
             AND e.status IN ('READY', 'RUNNING', 'RETRY_WAIT'))))
ORDER BY b.cool_down_until
LIMIT 100;

-- name: flow_passes_due
-- Whether the breakers' probe and the expiry would find anything, in one read: the scheduler
-- that runs the passes asks this every second and runs a pass only when it has work (an idle
-- system's passes were two statements a second, one of them a write transaction on SQLite).
-- Each EXISTS is the pass's own WHERE clause over its partial index.
SELECT EXISTS (
           SELECT 1 FROM circuit_breakers b
           WHERE b.state <> 'closed'
             AND ((b.state = 'open' AND b.cool_down_until <= :now)
                  OR (b.state = 'half_open' AND NOT EXISTS (
                      SELECT 1 FROM executions e
                      WHERE e.execution_id = b.probe_execution_id
                        AND e.status IN ('READY', 'RUNNING', 'RETRY_WAIT'))))) AS breakers,
       EXISTS (
           SELECT 1 FROM executions
           WHERE status IN ('SCHEDULED', 'READY') AND started_at IS NULL
             AND start_by IS NOT NULL AND start_by < :now)
       OR EXISTS (
           SELECT 1 FROM executions
           WHERE status IN ('SCHEDULED', 'READY') AND started_at IS NULL
             AND deadline IS NOT NULL AND deadline < :now) AS expiry;

-- name: circuit_breaker_probe_pick
-- The first READY execution of the definition in claim order: the probe.
SELECT execution_id FROM executions
WHERE status = 'READY' AND tenant = :tenant AND definition_uri = :definition_uri
ORDER BY priority DESC, ready_at
LIMIT 1;

-- name: circuit_breaker_list
SELECT tenant, definition_uri, state, consecutive_failures, recent, cool_down_until,
    probe_execution_id, updated_at
FROM circuit_breakers
WHERE tenant = :tenant
ORDER BY definition_uri;

-- name: circuit_breaker_transitions
SELECT tenant, definition_uri, from_state, to_state, reason, at
FROM circuit_breaker_transitions
WHERE tenant = :tenant AND definition_uri = :definition_uri
ORDER BY transition_id DESC
LIMIT :limit;

-- name: circuit_breaker_counts
SELECT state, count(*) AS n FROM circuit_breakers GROUP BY state;

-- Deadlines (docs/flow-control.md): executions that never started by their startBy, or by their
-- deadline, end EXPIRED. Read through the two partial indexes of unstarted executions with a
-- limit (executions_start_by, executions_deadline), inside BEGIN IMMEDIATE.

-- name: execution_expire_due
SELECT execution_id, status FROM executions
WHERE status IN ('SCHEDULED', 'READY') AND started_at IS NULL
  AND ((start_by IS NOT NULL AND start_by < :now) OR (deadline IS NOT NULL AND deadline < :now))
LIMIT :limit;

-- name: execution_expire_one
UPDATE executions
SET status = 'EXPIRED', finished_at = :now, updated_at = :now, next_attempt_at = NULL,
    error = json_object(
        'kind', 'expired',
        'message', CASE WHEN start_by IS NOT NULL AND start_by < :now
                        THEN 'not started by its startBy' ELSE 'not started by its deadline' END,
        'startBy', start_by, 'deadline', deadline)
WHERE execution_id = :execution_id AND status IN ('SCHEDULED', 'READY') AND started_at IS NULL
RETURNING *;

-- name: execution_expire_claimed
-- Claimed after its startBy: not run. Fenced like a result.
UPDATE executions
SET status = 'EXPIRED', finished_at = :now, updated_at = :now, lease_owner = NULL,
    lease_expires_at = NULL, error = :error
WHERE execution_id = :execution_id AND status = 'RUNNING' AND fencing_token = :fencing_token
RETURNING attempt_count;

-- name: attempt_abandon
UPDATE attempts SET status = 'ABANDONED', finished_at = :now, error = :error
WHERE execution_id = :execution_id AND attempt_number = :attempt_number
  AND fencing_token = :fencing_token AND status = 'RUNNING';

-- name: execution_event_expired
INSERT INTO execution_events (execution_id, kind, at, detail)
VALUES (:execution_id, 'expired', :now, :detail);
