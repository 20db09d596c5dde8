-- Flow control (issue 14): concurrency limits per (tenant, definition, key), enforced by the claim.
-- An execution's key, limit and order are fixed at submit; all three are NULL for an execution
-- without a limit. concurrency_key is '' when the limit is for the whole definition.
ALTER TABLE executions ADD COLUMN concurrency_key TEXT;
ALTER TABLE executions ADD COLUMN concurrency_limit INTEGER;
ALTER TABLE executions ADD COLUMN concurrency_order TEXT;

-- The queue of each group: executions with a limit that have not finished, in start order (the
-- claim counts the RUNNING ones and, for fifo, looks for an earlier one still to run).
CREATE INDEX executions_concurrency_queue
    ON executions (tenant, definition_uri, concurrency_key, execute_at, execution_id)
    WHERE concurrency_limit IS NOT NULL
      AND status IN ('SCHEDULED', 'READY', 'RUNNING', 'RETRY_WAIT');

-- The slots held, as on PostgreSQL (the same schema on both backends, and the dashboard reads
-- the use of each group from it). SQLite has one writer at a time, so its claim could count the
-- RUNNING rows instead; it keeps this table exact all the same, with the same trigger.
CREATE TABLE concurrency_holds (
    tenant          TEXT    NOT NULL,
    definition_uri  TEXT    NOT NULL,
    concurrency_key TEXT    NOT NULL,
    slot            INTEGER NOT NULL,
    execution_id    TEXT    NOT NULL,
    PRIMARY KEY (tenant, definition_uri, concurrency_key, slot)
);
CREATE INDEX concurrency_holds_execution ON concurrency_holds (execution_id);

CREATE TRIGGER executions_concurrency_release AFTER UPDATE OF status ON executions
    FOR EACH ROW
    WHEN OLD.status = 'RUNNING' AND NEW.status <> 'RUNNING' AND OLD.concurrency_limit IS NOT NULL
BEGIN
    DELETE FROM concurrency_holds WHERE execution_id = OLD.execution_id;
END;
