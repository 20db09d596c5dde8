-- The Cron Service's own tables. Nothing here references the executions table: the service
-- materialises each occurrence through the Client SDK, and a history row names its execution
-- by id only. Times are INTEGER microseconds (UTC), ids TEXT, JSON TEXT, as in 0001.

CREATE TABLE cron_jobs (
    cron_job_id         TEXT    NOT NULL PRIMARY KEY,
    tenant              TEXT    NOT NULL,
    name                TEXT    NOT NULL,
    definition_uri      TEXT    NOT NULL,
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
    CONSTRAINT cron_jobs_name UNIQUE (tenant, name)
);

-- Due jobs are found through a partial index of the ACTIVE ones, ordered by time.
CREATE INDEX cron_jobs_due ON cron_jobs (next_run_at) WHERE status = 'ACTIVE';

CREATE TABLE cron_occurrences (
    record_id     INTEGER PRIMARY KEY AUTOINCREMENT,
    cron_job_id   TEXT    NOT NULL REFERENCES cron_jobs (cron_job_id) ON DELETE CASCADE,
    occurrence    INTEGER NOT NULL,
    outcome       TEXT    NOT NULL CHECK (outcome IN ('SUBMITTED', 'SKIPPED_OVERLAP',
        'SKIPPED_MISFIRE', 'COALESCED', 'SKIPPED_PAUSED', 'SKIPPED_DST', 'REPLACED', 'FAILED')),
    execution_id  TEXT,
    execute_at    INTEGER,
    reason        TEXT,
    recorded_at   INTEGER NOT NULL,
    -- A tick retried after a crash records nothing twice.
    CONSTRAINT cron_occurrences_once UNIQUE (cron_job_id, occurrence, outcome)
);

-- Who changed which cron job, when, and what it looked like before and after. No foreign key:
-- the trail outlives a deleted job.
CREATE TABLE cron_audit (
    audit_id     INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant       TEXT    NOT NULL,
    cron_job_id  TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    action       TEXT    NOT NULL,
    actor        TEXT    NOT NULL,
    at           INTEGER NOT NULL,
    before       TEXT,
    after        TEXT
);
CREATE INDEX cron_audit_job ON cron_audit (tenant, cron_job_id, audit_id);
