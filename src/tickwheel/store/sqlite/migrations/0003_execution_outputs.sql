-- Outputs too large to keep inline: the executions row (read on every claim, list and get) keeps
-- only output_reference, and the output itself lives here.
CREATE TABLE execution_outputs (
    execution_id  TEXT    NOT NULL PRIMARY KEY
        REFERENCES executions (execution_id) ON DELETE CASCADE,
    output        TEXT    NOT NULL,
    size_bytes    INTEGER NOT NULL,
    created_at    INTEGER NOT NULL
);
