-- Outputs too large to keep inline: the executions row (read on every claim, list and get) keeps
-- only output_reference, and the output itself lives here.
CREATE TABLE execution_outputs (
    execution_id  uuid        NOT NULL PRIMARY KEY
        REFERENCES executions (execution_id) ON DELETE CASCADE,
    output        jsonb       NOT NULL,
    size_bytes    integer     NOT NULL,
    created_at    timestamptz NOT NULL
);
