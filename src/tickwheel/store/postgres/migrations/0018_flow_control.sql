-- Flow control (issue 14): concurrency limits per (tenant, definition, key), enforced by the claim.
-- An execution's key, limit and order are fixed at submit; all three are NULL for an execution
-- without a limit (so existing rows need no rewrite, and the unlimited claim never looks further).
-- concurrency_key is '' when the limit is for the whole definition.
ALTER TABLE executions ADD COLUMN concurrency_key text;
ALTER TABLE executions ADD COLUMN concurrency_limit integer;
ALTER TABLE executions ADD COLUMN concurrency_order text;

-- The queue of each group, for `order: fifo` (is an earlier execution of the key still to run or
-- running?): only executions with a limit that have not finished, in start order.
CREATE INDEX executions_concurrency_queue
    ON executions (tenant, definition_uri, concurrency_key, execute_at, execution_id)
    WHERE concurrency_limit IS NOT NULL
      AND status IN ('SCHEDULED', 'READY', 'RUNNING', 'RETRY_WAIT');

-- One row per slot held: a RUNNING execution with a limit holds slot 0 <= slot < limit of its
-- group. The primary key is the arbiter between concurrent claimers (INSERT ... ON CONFLICT DO
-- NOTHING: the second waits for the first and then takes nothing), so the limit holds under
-- READ COMMITTED with any number of claimers. A release deletes only its own row, so finishers
-- never contend with each other or with claimers for a shared counter row (no lock order to
-- keep, no deadlock between batches).
CREATE TABLE concurrency_holds (
    tenant          text    NOT NULL,
    definition_uri  text    NOT NULL,
    concurrency_key text    NOT NULL,
    slot            integer NOT NULL,
    execution_id    uuid    NOT NULL,
    PRIMARY KEY (tenant, definition_uri, concurrency_key, slot)
);
CREATE INDEX concurrency_holds_execution ON concurrency_holds (execution_id);

-- Whatever moves an execution out of RUNNING (a finish, the reaper's reclaim of a lost lease, a
-- cancel, a release at shutdown, and any path added later) frees its slot, in its transaction.
-- The WHEN clause keeps the trigger off every execution without a limit: the unlimited hot path
-- pays one comparison per updated row.
CREATE FUNCTION tickwheel_concurrency_release() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM concurrency_holds WHERE execution_id = OLD.execution_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER executions_concurrency_release AFTER UPDATE OF status ON executions
    FOR EACH ROW
    WHEN (OLD.status = 'RUNNING' AND NEW.status <> 'RUNNING'
          AND OLD.concurrency_limit IS NOT NULL)
    EXECUTE FUNCTION tickwheel_concurrency_release();

