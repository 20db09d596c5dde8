-- A cron job may start a Workflow Run per occurrence instead of an Execution of a Job
-- Definition: exactly one of definition_uri and workflow_name is set. The history row of such an
-- occurrence names its run; the job remembers its last run for the overlap policy.
--
-- SQLite cannot drop a NOT NULL or add a CHECK in place, so both tables are rebuilt. Migrations
-- run inside one transaction, where foreign keys cannot be switched off: the rows are copied
-- aside first and cron_occurrences is dropped before cron_jobs, so that dropping cron_jobs
-- cascades into nothing.

CREATE TABLE cron_jobs_0009 AS SELECT * FROM cron_jobs;
CREATE TABLE cron_occurrences_0009 AS SELECT * FROM cron_occurrences;
DROP TABLE cron_occurrences;
DROP TABLE cron_jobs;

CREATE TABLE cron_jobs (
    cron_job_id         TEXT    NOT NULL PRIMARY KEY,
    tenant              TEXT    NOT NULL,
    name                TEXT    NOT NULL,
    -- Exactly one target: a job definition or a workflow (workflow_name, below).
    definition_uri      TEXT,
    -- NULL: the latest version, resolved again at every occurrence; a number pins it.
    definition_version  INTEGER,
    inputs              TEXT    NOT NULL,
    expression          TEXT    NOT NULL,
    timezone            TEXT    NOT NULL,
    dst_policy          TEXT    NOT NULL,
    status              TEXT    NOT NULL CHECK (status IN ('ACTIVE', 'PAUSED')),
    misfire_policy      TEXT    NOT NULL CHECK (misfire_policy IN ('skip', 'run_once', 'catch_up')),
    max_catch_up        INTEGER NOT NULL CHECK (max_catch_up > 0),
    overlap_policy      TEXT    NOT NULL CHECK (overlap_policy IN ('allow', 'forbid', 'replace')),
    jitter_seconds      INTEGER NOT NULL CHECK (jitter_seconds >= 0),
    start_at            INTEGER,
    end_at              INTEGER,
    -- The next occurrence not yet materialised; NULL once end_at has passed.
    next_run_at         INTEGER,
    last_occurrence     INTEGER,
    last_execution_id   TEXT,
    -- A cron instance's claim on the job while it materialises occurrences: a lease, so that a
    -- killed instance's jobs are picked up by another once it runs out.
    claimed_by          TEXT,
    claim_expires_at    INTEGER,
    -- Bumped by every change a user makes (optimistic concurrency), never by the service.
    version             INTEGER NOT NULL CHECK (version > 0),
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    paused_at           INTEGER,
    -- The columns of 0009 come last, where PostgreSQL's ALTER TABLE ADD COLUMN puts them.
    -- The workflow target (NULL version: the latest at every occurrence).
    workflow_name       TEXT,
    workflow_version    INTEGER,
    -- What the last occurrence became: an execution or a workflow run (the other is NULL).
    last_workflow_run_id TEXT,
    CONSTRAINT cron_jobs_name UNIQUE (tenant, name),
    CONSTRAINT cron_jobs_one_target CHECK ((definition_uri IS NULL) <> (workflow_name IS NULL))
);
INSERT INTO cron_jobs (
    cron_job_id, tenant, name, definition_uri, definition_version, inputs, expression, timezone,
    dst_policy, status, misfire_policy, max_catch_up, overlap_policy, jitter_seconds, start_at,
    end_at, next_run_at, last_occurrence, last_execution_id, claimed_by, claim_expires_at,
    version, created_at, updated_at, paused_at
)
SELECT
    cron_job_id, tenant, name, definition_uri, definition_version, inputs, expression, timezone,
    dst_policy, status, misfire_policy, max_catch_up, overlap_policy, jitter_seconds, start_at,
    end_at, next_run_at, last_occurrence, last_execution_id, claimed_by, claim_expires_at,
    version, created_at, updated_at, paused_at
FROM cron_jobs_0009;
CREATE INDEX cron_jobs_due ON cron_jobs (next_run_at) WHERE status = 'ACTIVE';

CREATE TABLE cron_occurrences (
    record_id        INTEGER PRIMARY KEY AUTOINCREMENT,
    cron_job_id      TEXT    NOT NULL REFERENCES cron_jobs (cron_job_id) ON DELETE CASCADE,
    occurrence       INTEGER NOT NULL,
    outcome          TEXT    NOT NULL CHECK (outcome IN ('SUBMITTED', 'SKIPPED_OVERLAP',
        'SKIPPED_MISFIRE', 'COALESCED', 'SKIPPED_PAUSED', 'SKIPPED_DST', 'REPLACED', 'FAILED')),
    execution_id     TEXT,
    execute_at       INTEGER,
    reason           TEXT,
    recorded_at      INTEGER NOT NULL,
    workflow_run_id  TEXT,
    -- A tick retried after a crash records nothing twice.
    CONSTRAINT cron_occurrences_once UNIQUE (cron_job_id, occurrence, outcome)
);
INSERT INTO cron_occurrences (
    record_id, cron_job_id, occurrence, outcome, execution_id, execute_at, reason, recorded_at
)
SELECT record_id, cron_job_id, occurrence, outcome, execution_id, execute_at, reason, recorded_at
FROM cron_occurrences_0009;

DROP TABLE cron_occurrences_0009;
DROP TABLE cron_jobs_0009;
