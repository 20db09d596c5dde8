-- DAG workflows, the same as the SQLite migration in native types: definitions (immutable, like
-- job definitions), runs, their task runs, and the outbox of finished workflow executions.
-- Nothing references the executions table: the orchestrator submits each task run through the
-- Client SDK and names its execution by id.
CREATE TABLE workflow_definitions (
    name          text        NOT NULL,
    version       integer     NOT NULL,
    document      jsonb       NOT NULL,
    content_hash  text        NOT NULL,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (name, version)
);

CREATE TABLE workflow_runs (
    workflow_run_id   uuid        PRIMARY KEY,
    tenant            text        NOT NULL,
    workflow_name     text        NOT NULL,
    workflow_version  integer     NOT NULL,
    inputs            jsonb       NOT NULL,
    status            text        NOT NULL CHECK (status IN ('RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
    idempotency_key   text,
    request_hash      text        NOT NULL,
    retry_count       integer     NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    finished_at       timestamptz
);
CREATE UNIQUE INDEX workflow_runs_key ON workflow_runs (tenant, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE workflow_task_runs (
    workflow_run_id  uuid        NOT NULL REFERENCES workflow_runs (workflow_run_id) ON DELETE CASCADE,
    task_name        text        NOT NULL,
    status           text        NOT NULL CHECK (status IN ('PENDING', 'SUBMITTED', 'SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED')),
    execution_id     uuid,
    output           jsonb,
    error            jsonb,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (workflow_run_id, task_name)
);

-- The outbox: the transaction that finishes a workflow's execution adds a row here; an
-- orchestrator claims rows with FOR UPDATE SKIP LOCKED and a lease (a killed orchestrator's
-- rows go to another) and deletes them once the run is evaluated.
CREATE TABLE workflow_events (
    event_id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    execution_id      uuid        NOT NULL,
    workflow_run_id   uuid        NOT NULL,
    status            text        NOT NULL,
    created_at        timestamptz NOT NULL,
    claimed_by        text,
    claim_expires_at  timestamptz
);
