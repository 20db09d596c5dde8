-- Pauses and circuit breakers (issue 14, docs/flow-control.md).
--
-- First, EXPIRED, a new terminal status of executions (not started by its startBy or deadline).
-- SQLite cannot change a CHECK in place, and rebuilding executions would cascade-delete its
-- attempts and history: the table's definition text is edited instead (the writable_schema way
-- SQLite documents for a change every stored row already satisfies), before the DDL below, which
-- bumps the schema cookie so that every other connection reloads it. RESET reloads it here.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql, '''FAILED'', ''CANCELLED'')', '''FAILED'', ''CANCELLED'', ''EXPIRED'')')
WHERE type = 'table' AND name = 'executions';
PRAGMA writable_schema = RESET;
--
-- pauses: what holds a tenant's READY executions back at claim time, read by the one clause the
-- claim statement has for it. definition_uri '' pauses the whole tenant. kind 'manual' is a
-- person's pause (API, SDK, CLI, dashboard); kind 'breaker' is an open circuit breaker's, and
-- while it is half-open its probe_execution_id is the one execution let through. A manual pause
-- and a breaker's are separate rows, so that resuming one never lifts the other.
-- The table is empty unless something is paused: the claim's NOT EXISTS then costs one probe
-- of an empty primary key. Instants are integer microseconds (UTC), ids text, as elsewhere here.
CREATE TABLE pauses (
    tenant              TEXT        NOT NULL,
    definition_uri      TEXT        NOT NULL,
    kind                TEXT        NOT NULL CHECK (kind IN ('manual', 'breaker')),
    reason              TEXT        NOT NULL,
    paused_at           INTEGER     NOT NULL,
    probe_execution_id  TEXT,
    PRIMARY KEY (tenant, definition_uri, kind)
);

-- One breaker per tenant and definition whose definition configures circuitBreaker, made at the
-- first finished attempt. recent: the last outcomes while closed, oldest first ('s' or 'f').
CREATE TABLE circuit_breakers (
    tenant                TEXT        NOT NULL,
    definition_uri        TEXT        NOT NULL,
    state                 TEXT        NOT NULL CHECK (state IN ('closed', 'open', 'half_open')),
    consecutive_failures  INTEGER     NOT NULL,
    recent                TEXT        NOT NULL,
    cool_down_until       INTEGER,
    probe_execution_id    TEXT,
    updated_at            INTEGER     NOT NULL,
    PRIMARY KEY (tenant, definition_uri)
);
-- The probe sweep reads the open and half-open breakers only.
CREATE INDEX circuit_breakers_tripped ON circuit_breakers (cool_down_until) WHERE state <> 'closed';

-- Every transition, with its reason and instant: the breaker's history.
CREATE TABLE circuit_breaker_transitions (
    transition_id   INTEGER     PRIMARY KEY AUTOINCREMENT,
    tenant          TEXT        NOT NULL,
    definition_uri  TEXT        NOT NULL,
    from_state      TEXT        NOT NULL,
    to_state        TEXT        NOT NULL,
    reason          TEXT        NOT NULL,
    at              INTEGER     NOT NULL
);
CREATE INDEX circuit_breaker_transitions_definition
    ON circuit_breaker_transitions (tenant, definition_uri, transition_id);

-- Deadlines: startBy, the instant by which an execution must have started, and deadline, after
-- which no attempt of it starts; NULL unless the submission set them.
ALTER TABLE executions ADD COLUMN start_by INTEGER;
ALTER TABLE executions ADD COLUMN deadline INTEGER;
-- The expiry sweep reads only executions that have a limit and have not started yet.
CREATE INDEX executions_start_by ON executions (start_by)
    WHERE status IN ('SCHEDULED', 'READY') AND started_at IS NULL AND start_by IS NOT NULL;
CREATE INDEX executions_deadline ON executions (deadline)
    WHERE status IN ('SCHEDULED', 'READY') AND started_at IS NULL AND deadline IS NOT NULL;
-- EXPIRED is terminal: counted as finished and pruned like the others, through the same index.
DROP INDEX executions_finished;
CREATE INDEX executions_finished ON executions (finished_at)
    WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED');
