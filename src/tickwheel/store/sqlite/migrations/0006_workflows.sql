-- DAG workflows: definitions (immutable, like job definitions), runs, their task runs, and the
-- outbox of finished workflow executions. Nothing references the executions table: the
-- orchestrator submits each task run through the Client SDK and names its execution by id.
-- Times are INTEGER microseconds (UTC), ids TEXT, JSON TEXT, as in 0001.
CREATE TABLE workflow_definitions (
    name          TEXT    NOT NULL,
    version       INTEGER NOT NULL,
    document      TEXT    NOT NULL,
    content_hash  TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (name, version)
);

CREATE TABLE workflow_runs (
    workflow_run_id   TEXT    NOT NULL PRIMARY KEY,
    tenant            TEXT    NOT NULL,
    workflow_name     TEXT    NOT NULL,
    workflow_version  INTEGER NOT NULL,
    inputs            TEXT    NOT NULL,
    status            TEXT    NOT NULL CHECK (status IN ('RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
    idempotency_key   TEXT,
    request_hash      TEXT    NOT NULL,
    retry_count       INTEGER NOT NULL DEFAULT 0,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    finished_at       INTEGER
);
CREATE UNIQUE INDEX workflow_runs_key ON workflow_runs (tenant, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE workflow_task_runs (
    workflow_run_id  TEXT    NOT NULL REFERENCES workflow_runs (workflow_run_id) ON DELETE CASCADE,
    task_name        TEXT    NOT NULL,
    status           TEXT    NOT NULL CHECK (status IN ('PENDING', 'SUBMITTED', 'SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED')),
    execution_id     TEXT,
    output           TEXT,
    error            TEXT,
    updated_at       INTEGER NOT NULL,
    PRIMARY KEY (workflow_run_id, task_name)
);

-- The outbox: the transaction that finishes a workflow's execution adds a row here; an
-- orchestrator claims it (a lease, so a killed orchestrator's rows go to another) and deletes
-- it once the run is evaluated.
CREATE TABLE workflow_events (
    event_id          INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    execution_id      TEXT    NOT NULL,
    workflow_run_id   TEXT    NOT NULL,
    status            TEXT    NOT NULL,
    created_at        INTEGER NOT NULL,
    claimed_by        TEXT,
    claim_expires_at  INTEGER
);
