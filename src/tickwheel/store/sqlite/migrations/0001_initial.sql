-- Times are INTEGER microseconds since the Unix epoch (UTC): they compare and sort as numbers.
-- Ids are TEXT in canonical UUID form; JSON is TEXT.

CREATE TABLE definitions (
    name          TEXT    NOT NULL,
    version       INTEGER NOT NULL CHECK (version > 0),
    document      TEXT    NOT NULL,
    content_hash  TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (name, version)
);

CREATE TABLE executions (
    execution_id        TEXT    NOT NULL PRIMARY KEY,
    tenant              TEXT    NOT NULL,
    definition_uri      TEXT    NOT NULL,
    definition_version  INTEGER NOT NULL,
    input_snapshot      TEXT    NOT NULL,
    execute_at          INTEGER NOT NULL,
    bucket_start        INTEGER NOT NULL,
    shard_id            INTEGER NOT NULL CHECK (shard_id BETWEEN 0 AND 1023),
    idempotency_key     TEXT,
    request_fingerprint TEXT,
    status              TEXT    NOT NULL CHECK (status IN
        ('SCHEDULED', 'READY', 'RUNNING', 'RETRY_WAIT', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
    priority            INTEGER NOT NULL DEFAULT 0,
    attempt_count       INTEGER NOT NULL DEFAULT 0,
    max_attempts        INTEGER NOT NULL CHECK (max_attempts > 0),
    next_attempt_at     INTEGER,
    ready_at            INTEGER,
    lease_owner         TEXT,
    lease_expires_at    INTEGER,
    fencing_token       INTEGER,
    output              TEXT,
    output_reference    TEXT,
    error               TEXT,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    started_at          INTEGER,
    finished_at         INTEGER,
    -- One execution per key per tenant: the database decides, not Python. NULL keys never clash.
    CONSTRAINT executions_idempotency_key UNIQUE (tenant, idempotency_key)
);

-- Due work is found through partial indexes that hold only rows in the status being looked for.
CREATE INDEX executions_due ON executions (shard_id, bucket_start, execute_at)
    WHERE status = 'SCHEDULED';
CREATE INDEX executions_ready ON executions (priority DESC, ready_at)
    WHERE status = 'READY';
CREATE INDEX executions_running_lease ON executions (lease_expires_at)
    WHERE status = 'RUNNING';
CREATE INDEX executions_retry_due ON executions (next_attempt_at)
    WHERE status = 'RETRY_WAIT';
-- Listing, newest first, per tenant.
CREATE INDEX executions_tenant_list ON executions (tenant, execution_id);
CREATE INDEX executions_tenant_status ON executions (tenant, status, execution_id);
CREATE INDEX executions_tenant_definition ON executions (tenant, definition_uri, execution_id);

CREATE TABLE attempts (
    execution_id    TEXT    NOT NULL REFERENCES executions (execution_id) ON DELETE CASCADE,
    attempt_number  INTEGER NOT NULL CHECK (attempt_number > 0),
    worker_id       TEXT    NOT NULL,
    fencing_token   INTEGER NOT NULL,
    status          TEXT    NOT NULL CHECK (status IN
        ('RUNNING', 'SUCCEEDED', 'FAILED', 'TIMED_OUT', 'ABANDONED', 'CANCELLED')),
    started_at      INTEGER NOT NULL,
    finished_at     INTEGER,
    error           TEXT,
    PRIMARY KEY (execution_id, attempt_number)
);

CREATE TABLE execution_events (
    event_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    execution_id  TEXT    NOT NULL REFERENCES executions (execution_id) ON DELETE CASCADE,
    kind          TEXT    NOT NULL,
    at            INTEGER NOT NULL,
    detail        TEXT    NOT NULL DEFAULT '{}'
);
CREATE INDEX execution_events_execution ON execution_events (execution_id, event_id);

-- Fencing tokens must only ever grow, across all executions: one counter row hands them out.
CREATE TABLE counters (
    name   TEXT    NOT NULL PRIMARY KEY,
    value  INTEGER NOT NULL
);
INSERT INTO counters (name, value) VALUES ('fencing_token', 0);

CREATE TABLE api_keys (
    key_id      TEXT    NOT NULL PRIMARY KEY,
    tenant      TEXT    NOT NULL,
    scope       TEXT    NOT NULL CHECK (scope IN ('read', 'submit', 'admin')),
    name        TEXT    NOT NULL DEFAULT '',
    key_hash    TEXT    NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);
