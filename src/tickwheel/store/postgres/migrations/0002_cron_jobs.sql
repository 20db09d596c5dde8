-- The Cron Service's own tables, the same as the SQLite migration in native types. Nothing here
-- references the executions table: the service materialises each occurrence through the Client
-- SDK, and a history row names its execution by id only.

CREATE TABLE cron_jobs (
    cron_job_id         uuid        PRIMARY KEY,
    tenant              text        NOT NULL,
    name                text        NOT NULL,
    definition_uri      text        NOT NULL,
    -- NULL: the latest version, resolved again at every occurrence; a number pins it.
    definition_version  integer,
    inputs              jsonb       NOT NULL,
    expression          text        NOT NULL,
    timezone            text        NOT NULL,
    dst_policy          jsonb       NOT NULL,
    status              text        NOT NULL CHECK (status IN ('ACTIVE', 'PAUSED')),
    misfire_policy      text        NOT NULL CHECK (misfire_policy IN ('skip', 'run_once', 'catch_up')),
    max_catch_up        integer     NOT NULL CHECK (max_catch_up > 0),
    overlap_policy      text        NOT NULL CHECK (overlap_policy IN ('allow', 'forbid', 'replace')),
    jitter_seconds      integer     NOT NULL CHECK (jitter_seconds >= 0),
    start_at            timestamptz,
    end_at              timestamptz,
    -- The next occurrence not yet materialised; NULL once end_at has passed.
    next_run_at         timestamptz,
    last_occurrence     timestamptz,
    last_execution_id   uuid,
    -- A cron instance's claim on the job while it materialises occurrences: a lease, so that a
    -- killed instance's jobs are picked up by another once it runs out.
    claimed_by          text,
    claim_expires_at    timestamptz,
    -- Bumped by every change a user makes (optimistic concurrency), never by the service.
    version             integer     NOT NULL CHECK (version > 0),
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    paused_at           timestamptz,
    CONSTRAINT cron_jobs_name UNIQUE (tenant, name)
);

-- Due jobs are found through a partial index of the ACTIVE ones, ordered by time: a claim walks
-- only jobs that are due, never the paused or the far-future ones.
CREATE INDEX cron_jobs_due ON cron_jobs (next_run_at) WHERE status = 'ACTIVE';

CREATE TABLE cron_occurrences (
    record_id     bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    cron_job_id   uuid        NOT NULL REFERENCES cron_jobs (cron_job_id) ON DELETE CASCADE,
    occurrence    timestamptz NOT NULL,
    outcome       text        NOT NULL CHECK (outcome IN ('SUBMITTED', 'SKIPPED_OVERLAP',
        'SKIPPED_MISFIRE', 'COALESCED', 'SKIPPED_PAUSED', 'SKIPPED_DST', 'REPLACED', 'FAILED')),
    execution_id  uuid,
    execute_at    timestamptz,
    reason        text,
    recorded_at   timestamptz NOT NULL,
    -- A tick retried after a crash records nothing twice.
    CONSTRAINT cron_occurrences_once UNIQUE (cron_job_id, occurrence, outcome)
);

-- Who changed which cron job, when, and what it looked like before and after. No foreign key:
-- the trail outlives a deleted job.
CREATE TABLE cron_audit (
    audit_id     bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant       text        NOT NULL,
    cron_job_id  uuid        NOT NULL,
    name         text        NOT NULL,
    action       text        NOT NULL,
    actor        text        NOT NULL,
    at           timestamptz NOT NULL,
    before       jsonb,
    after        jsonb
);
CREATE INDEX cron_audit_job ON cron_audit (tenant, cron_job_id, audit_id);
