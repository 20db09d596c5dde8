-- What a status change writes (issue 13, docs/scaling.md "What a status change writes"). Every
-- transition changes status, which partial indexes test, so no transition is a HOT update: each
-- one adds an entry to every index of executions whose predicate the new row meets, the five
-- plain ones always. Two of those writes go.
--
-- executions_tenant_list (tenant, execution_id): a tenant's listing reads
-- executions_tenant_status (tenant, status, execution_id) instead, one ordered range per status
-- merged by execution_id (the store's execution_list), which also serves a status filter in
-- order. One index entry fewer at every transition (and at every insert).
DROP INDEX executions_tenant_list;

-- The foreign key of attempts: an attempt row is inserted only by the claim, in the statement
-- that updates (and so locks) its execution, so the key's check (a probe of executions and a
-- KEY SHARE lock of a row the claim holds locked already) proved nothing at every claim. What the
-- key did on delete stays: a statement trigger deletes the attempts of the executions a DELETE
-- removed (the retention pruner's batches), by one probe of attempts' primary key per id, in the
-- same statement; TRUNCATE of executions empties attempts as TRUNCATE ... CASCADE did. The
-- partitioned layout (migration 0010) already works this way, for all the child tables.
ALTER TABLE attempts DROP CONSTRAINT attempts_execution_id_fkey;

CREATE FUNCTION tickwheel_execution_attempts_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM attempts
    WHERE execution_id = ANY (ARRAY(SELECT execution_id FROM gone));
    RETURN NULL;
END
$$;

CREATE FUNCTION tickwheel_execution_attempts_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- A TRUNCATE that named attempts too has emptied it already (and it cannot be truncated
    -- again from here).
    IF EXISTS (SELECT FROM attempts) THEN TRUNCATE attempts; END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER executions_attempts_delete AFTER DELETE ON executions
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION tickwheel_execution_attempts_delete();
CREATE TRIGGER executions_attempts_truncate AFTER TRUNCATE ON executions
    FOR EACH STATEMENT EXECUTE FUNCTION tickwheel_execution_attempts_truncate();
