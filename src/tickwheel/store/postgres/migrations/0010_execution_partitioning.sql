-- Optional time-range partitioning of executions by month (docs/scaling.md, "Partitioning").
-- Default installs stay one plain table, and this migration changes nothing they use: it only
-- adds the trigger functions that `tickwheel db partitions enable` attaches when it converts the
-- table. Keeping them here (not in the command) puts them under the migrations' checksums.
--
-- A partitioned table can hold no unique index that leaves out the partition key
-- (execution_id), so "one execution per (tenant, idempotency key)" moves to a plain table,
-- execution_keys, filled by a BEFORE INSERT trigger. The trigger claims the key with
-- ON CONFLICT DO NOTHING, which waits for a competing uncommitted claim of the same key and
-- then skips, exactly as the unique constraint did; when the key is taken it returns NULL, which
-- skips the execution row, so the store's INSERT ... RETURNING sees what it saw before.
CREATE FUNCTION tickwheel_execution_key_claim() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.idempotency_key IS NULL THEN
        RETURN NEW;  -- NULL keys never clash, as under the unique constraint
    END IF;
    INSERT INTO execution_keys (tenant, idempotency_key, execution_id)
    VALUES (NEW.tenant, NEW.idempotency_key, NEW.execution_id)
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        RETURN NEW;
    END IF;
    RETURN NULL;
END
$$;

-- The partitioned layout replaces the foreign keys of attempts, execution_events and
-- execution_outputs by this statement trigger: detaching a partition that a foreign key
-- references makes PostgreSQL join the whole referencing table against the partition under an
-- ACCESS EXCLUSIVE lock of executions, which would stall every claim for seconds per month
-- dropped. Deleting an execution (the pruner) still takes its attempts, history, output and
-- key with it, in the same statement, batch-wise: = ANY (ARRAY(...)) probes each table's index.
CREATE FUNCTION tickwheel_execution_children_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM attempts
    WHERE execution_id = ANY (ARRAY(SELECT execution_id FROM gone));
    DELETE FROM execution_events
    WHERE execution_id = ANY (ARRAY(SELECT execution_id FROM gone));
    DELETE FROM execution_outputs
    WHERE execution_id = ANY (ARRAY(SELECT execution_id FROM gone));
    DELETE FROM execution_keys
    WHERE execution_id = ANY (ARRAY(SELECT execution_id FROM gone WHERE idempotency_key IS NOT NULL));
    RETURN NULL;
END
$$;

-- TRUNCATE fires no delete trigger: empty what hung off the executions, as CASCADE did. A table
-- the same TRUNCATE statement named is empty already, and cannot be truncated again from here.
CREATE FUNCTION tickwheel_execution_children_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT FROM attempts) THEN TRUNCATE attempts; END IF;
    IF EXISTS (SELECT FROM execution_events) THEN TRUNCATE execution_events; END IF;
    IF EXISTS (SELECT FROM execution_outputs) THEN TRUNCATE execution_outputs; END IF;
    IF EXISTS (SELECT FROM execution_keys) THEN TRUNCATE execution_keys; END IF;
    RETURN NULL;
END
$$;
