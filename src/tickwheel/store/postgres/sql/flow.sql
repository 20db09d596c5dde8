-- Pauses and circuit breakers (issue 14). The claim statement reads `pauses` in one clause
-- (claims.sql); these write it. Manual pauses and breakers' pauses are separate rows.

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
