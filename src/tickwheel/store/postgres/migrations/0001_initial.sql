-- The same tables, columns, constraints and index names as the SQLite migration, in native
-- types: instants are timestamptz, ids uuid, JSON jsonb. Fencing tokens come from a sequence
-- (SQLite, which has none, keeps a counters row instead).

CREATE TABLE definitions (
    name          text        NOT NULL,
    version       integer     NOT NULL CHECK (version > 0),
    document      jsonb       NOT NULL,
    content_hash  text        NOT NULL,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (name, version)
);

CREATE TABLE executions (
    execution_id        uuid        PRIMARY KEY,
    tenant              text        NOT NULL,
    definition_uri      text        NOT NULL,
    definition_version  integer     NOT NULL,
    input_snapshot      jsonb       NOT NULL,
    execute_at          timestamptz NOT NULL,
    bucket_start        timestamptz NOT NULL,
    shard_id            smallint    NOT NULL CHECK (shard_id BETWEEN 0 AND 1023),
    idempotency_key     text,
    request_fingerprint text,
    status              text        NOT NULL CHECK (status IN
        ('SCHEDULED', 'READY', 'RUNNING', 'RETRY_WAIT', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
    priority            integer     NOT NULL DEFAULT 0,
    attempt_count       integer     NOT NULL DEFAULT 0,
    max_attempts        integer     NOT NULL CHECK (max_attempts > 0),
    next_attempt_at     timestamptz,
    ready_at            timestamptz,
    lease_owner         text,
    lease_expires_at    timestamptz,
    fencing_token       bigint,
    output              jsonb,
    output_reference    text,
    error               jsonb,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    started_at          timestamptz,
    finished_at         timestamptz,
    -- One execution per key per tenant: the database decides, not Python. NULL keys never clash.
    CONSTRAINT executions_idempotency_key UNIQUE (tenant, idempotency_key)
);

-- Due work is found through partial indexes that hold only rows in the status being looked for,
-- so a claim or a promotion never walks index entries of work that is not due.
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
    execution_id    uuid        NOT NULL REFERENCES executions (execution_id) ON DELETE CASCADE,
    attempt_number  integer     NOT NULL CHECK (attempt_number > 0),
    worker_id       text        NOT NULL,
    fencing_token   bigint      NOT NULL,
    status          text        NOT NULL CHECK (status IN
        ('RUNNING', 'SUCCEEDED', 'FAILED', 'TIMED_OUT', 'ABANDONED', 'CANCELLED')),
    started_at      timestamptz NOT NULL,
    finished_at     timestamptz,
    error           jsonb,
    PRIMARY KEY (execution_id, attempt_number)
);

CREATE TABLE execution_events (
    event_id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    execution_id  uuid        NOT NULL REFERENCES executions (execution_id) ON DELETE CASCADE,
    kind          text        NOT NULL,
    at            timestamptz NOT NULL,
    detail        jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX execution_events_execution ON execution_events (execution_id, event_id);

-- Fencing tokens must only ever grow, across all executions. A sequence never hands out a value
-- twice and never goes back, even when the transaction that drew it rolls back (gaps are fine).
CREATE SEQUENCE fencing_token_seq AS bigint;

CREATE TABLE api_keys (
    key_id      text        PRIMARY KEY,
    tenant      text        NOT NULL,
    scope       text        NOT NULL CHECK (scope IN ('read', 'submit', 'admin')),
    name        text        NOT NULL DEFAULT '',
    key_hash    text        NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL,
    revoked_at  timestamptz
);
