-- Pauses and circuit breakers (issue 14, docs/flow-control.md).
--
-- pauses: what holds a tenant's READY executions back at claim time, read by the one clause the
-- claim statement has for it. definition_uri '' pauses the whole tenant. kind 'manual' is a
-- person's pause (API, SDK, CLI, dashboard); kind 'breaker' is an open circuit breaker's, and
-- while it is half-open its probe_execution_id is the one execution let through. A manual pause
-- and a breaker's are separate rows, so that resuming one never lifts the other.
-- The table is empty unless something is paused: the claim's NOT EXISTS then costs one probe
-- of an empty primary key.
CREATE TABLE pauses (
    tenant              text        NOT NULL,
    definition_uri      text        NOT NULL,
    kind                text        NOT NULL CHECK (kind IN ('manual', 'breaker')),
    reason              text        NOT NULL,
    paused_at           timestamptz NOT NULL,
    probe_execution_id  uuid,
    PRIMARY KEY (tenant, definition_uri, kind)
);

-- One breaker per tenant and definition whose definition configures circuitBreaker, made at the
-- first finished attempt. recent: the last outcomes while closed, oldest first ('s' or 'f').
CREATE TABLE circuit_breakers (
    tenant                text        NOT NULL,
    definition_uri        text        NOT NULL,
    state                 text        NOT NULL CHECK (state IN ('closed', 'open', 'half_open')),
    consecutive_failures  integer     NOT NULL,
    recent                text        NOT NULL,
    cool_down_until       timestamptz,
    probe_execution_id    uuid,
    updated_at            timestamptz NOT NULL,
    PRIMARY KEY (tenant, definition_uri)
);
-- The probe sweep reads the open and half-open breakers only.
CREATE INDEX circuit_breakers_tripped ON circuit_breakers (cool_down_until) WHERE state <> 'closed';

-- Every transition, with its reason and instant: the breaker's history.
CREATE TABLE circuit_breaker_transitions (
    transition_id   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant          text        NOT NULL,
    definition_uri  text        NOT NULL,
    from_state      text        NOT NULL,
    to_state        text        NOT NULL,
    reason          text        NOT NULL,
    at              timestamptz NOT NULL
);
CREATE INDEX circuit_breaker_transitions_definition
    ON circuit_breaker_transitions (tenant, definition_uri, transition_id);

-- Deadlines (docs/flow-control.md): startBy, the instant by which an execution must have
-- started, and deadline, after which no attempt of it starts; both NULL unless the submission
-- set them, so existing rows need no rewrite. EXPIRED is a new terminal status: not started by
-- its startBy (or by its deadline).
ALTER TABLE executions DROP CONSTRAINT executions_status_check;
ALTER TABLE executions ADD CONSTRAINT executions_status_check CHECK (status IN
    ('SCHEDULED', 'READY', 'RUNNING', 'RETRY_WAIT', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED'));
ALTER TABLE executions ADD COLUMN start_by timestamptz;
ALTER TABLE executions ADD COLUMN deadline timestamptz;
-- The expiry sweep reads only executions that have a limit and have not started yet.
CREATE INDEX executions_start_by ON executions (start_by)
    WHERE status IN ('SCHEDULED', 'READY') AND started_at IS NULL AND start_by IS NOT NULL;
CREATE INDEX executions_deadline ON executions (deadline)
    WHERE status IN ('SCHEDULED', 'READY') AND started_at IS NULL AND deadline IS NOT NULL;
-- EXPIRED is terminal: counted as finished and pruned like the others, through the same index.
DROP INDEX executions_finished;
CREATE INDEX executions_finished ON executions (finished_at)
    WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED');
