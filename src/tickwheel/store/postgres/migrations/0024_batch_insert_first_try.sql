-- A batch's insert without ON CONFLICT's arbitration unless a key is taken (issue 13,
-- docs/scaling.md "A batch inserted without arbitration, in the database").
-- ON CONFLICT DO NOTHING makes every row a speculative insertion: each unique index is probed
-- before the row goes in, and a confirm record is written after it; about a fifth of the
-- database's CPU per row of a batch of new keys (12.4 against 10.4 µs). Most batches take no key
-- that is already taken, so execution_insert (sql/executions.sql) calls
-- tickwheel_execution_insert, which inserts the batch plainly first. A key taken, whether by a
-- committed row, by a competing insert that commits while this one waits for it, or twice in the
-- batch, raises unique_violation; the subtransaction of the EXCEPTION block then undoes what the
-- first try wrote, and the batch is inserted again with ON CONFLICT DO NOTHING, exactly as before.
-- Caught here, the violation is never logged by the server, nor seen by the client: one round
-- trip, the same answer, the same rows. Rows go in in the batch's order in both tries (the
-- store's lock order), so two batches sharing keys still wait on each other in one order.
-- Any other error (a value the database refuses) is raised as the statement raised it.

-- The rows of a batch as execution_insert sends them (rows.insert_items): what the items share
-- once, in `shared_values` (NULL where they differ), and each item's own values positionally in
-- `item_rows`. A plain SQL function of one SELECT, so that the planner inlines it.
CREATE FUNCTION tickwheel_execution_rows(shared_values jsonb, item_rows jsonb)
RETURNS TABLE (
    item_position bigint, execution_id uuid, tenant text, definition_uri text,
    definition_version integer, input_snapshot jsonb, execute_at timestamptz,
    bucket_start timestamptz, shard_id smallint, idempotency_key text, request_fingerprint text,
    status text, priority integer, max_attempts integer, created_at timestamptz,
    trace_context jsonb, start_by timestamptz, deadline timestamptz, concurrency_key text,
    concurrency_limit integer, concurrency_order text
)
LANGUAGE sql STABLE AS $$
WITH shared AS MATERIALIZED (
    -- Cast once per batch. Each row's own value where the batch has none in common (coalesce
    -- stops at the first value); past the end of a row (trailing shared columns are left off):
    -- NULL.
    SELECT
        (s ->> 0)::uuid AS execution_id, s ->> 1 AS tenant, s ->> 2 AS definition_uri,
        (s ->> 3)::integer AS definition_version, nullif(s -> 4, 'null') AS input_snapshot,
        (s ->> 5)::timestamptz AS execute_at, (s ->> 6)::timestamptz AS bucket_start,
        (s ->> 7)::smallint AS shard_id, s ->> 8 AS idempotency_key,
        s ->> 9 AS request_fingerprint, s ->> 10 AS status, (s ->> 11)::integer AS priority,
        (s ->> 12)::integer AS max_attempts, (s ->> 13)::timestamptz AS created_at,
        nullif(s -> 14, 'null') AS trace_context, (s ->> 15)::timestamptz AS start_by,
        (s ->> 16)::timestamptz AS deadline, s ->> 17 AS concurrency_key,
        (s ->> 18)::integer AS concurrency_limit, s ->> 19 AS concurrency_order
    FROM (SELECT shared_values AS s) AS given
)
SELECT
    position AS item_position,
    coalesce(shared.execution_id, (item ->> 0)::uuid) AS execution_id,
    coalesce(shared.tenant, item ->> 1) AS tenant,
    coalesce(shared.definition_uri, item ->> 2) AS definition_uri,
    coalesce(shared.definition_version, (item ->> 3)::integer) AS definition_version,
    coalesce(shared.input_snapshot, item -> 4) AS input_snapshot,
    coalesce(shared.execute_at, (item ->> 5)::timestamptz) AS execute_at,
    coalesce(shared.bucket_start, (item ->> 6)::timestamptz) AS bucket_start,
    coalesce(shared.shard_id, (item ->> 7)::smallint) AS shard_id,
    coalesce(shared.idempotency_key, item ->> 8) AS idempotency_key,
    coalesce(shared.request_fingerprint, item ->> 9) AS request_fingerprint,
    coalesce(shared.status, item ->> 10) AS status,
    coalesce(shared.priority, (item ->> 11)::integer) AS priority,
    coalesce(shared.max_attempts, (item ->> 12)::integer) AS max_attempts,
    coalesce(shared.created_at, (item ->> 13)::timestamptz) AS created_at,
    coalesce(shared.trace_context, nullif(item -> 14, 'null')) AS trace_context,
    coalesce(shared.start_by, (item ->> 15)::timestamptz) AS start_by,
    coalesce(shared.deadline, (item ->> 16)::timestamptz) AS deadline,
    coalesce(shared.concurrency_key, item ->> 17) AS concurrency_key,
    coalesce(shared.concurrency_limit, (item ->> 18)::integer) AS concurrency_limit,
    coalesce(shared.concurrency_order, item ->> 19) AS concurrency_order
FROM jsonb_array_elements(item_rows) WITH ORDINALITY AS given (item, position)
CROSS JOIN shared
$$;

-- The ids and statuses of the rows inserted (a row skipped for its taken key is not among them).
CREATE FUNCTION tickwheel_execution_insert(shared_values jsonb, item_rows jsonb)
RETURNS TABLE (inserted_id uuid, inserted_status text)
LANGUAGE plpgsql AS $$
DECLARE
    ids uuid[];
    statuses text[];
BEGIN
    BEGIN
        WITH inserted AS (
            INSERT INTO executions AS e (
                execution_id, tenant, definition_uri, definition_version, input_snapshot,
                execute_at, bucket_start, shard_id, idempotency_key, request_fingerprint, status,
                priority, attempt_count, max_attempts, ready_at, created_at, updated_at,
                trace_context, start_by, deadline, concurrency_key, concurrency_limit,
                concurrency_order
            )
            SELECT
                r.execution_id, r.tenant, r.definition_uri, r.definition_version,
                r.input_snapshot, r.execute_at, r.bucket_start, r.shard_id, r.idempotency_key,
                r.request_fingerprint, r.status, r.priority, 0, r.max_attempts,
                CASE WHEN r.status = 'READY' THEN r.created_at END, r.created_at, r.created_at,
                r.trace_context, r.start_by, r.deadline, r.concurrency_key, r.concurrency_limit,
                r.concurrency_order
            FROM tickwheel_execution_rows(shared_values, item_rows) AS r
            ORDER BY r.item_position
            RETURNING e.execution_id, e.status
        )
        SELECT array_agg(i.execution_id), array_agg(i.status) INTO ids, statuses
        FROM inserted AS i;
    EXCEPTION WHEN unique_violation THEN
        -- A key was taken (or an id, never in practice): the first try is undone, and the
        -- batch goes in with the arbitration, which skips each taken key.
        WITH inserted AS (
            INSERT INTO executions AS e (
                execution_id, tenant, definition_uri, definition_version, input_snapshot,
                execute_at, bucket_start, shard_id, idempotency_key, request_fingerprint, status,
                priority, attempt_count, max_attempts, ready_at, created_at, updated_at,
                trace_context, start_by, deadline, concurrency_key, concurrency_limit,
                concurrency_order
            )
            SELECT
                r.execution_id, r.tenant, r.definition_uri, r.definition_version,
                r.input_snapshot, r.execute_at, r.bucket_start, r.shard_id, r.idempotency_key,
                r.request_fingerprint, r.status, r.priority, 0, r.max_attempts,
                CASE WHEN r.status = 'READY' THEN r.created_at END, r.created_at, r.created_at,
                r.trace_context, r.start_by, r.deadline, r.concurrency_key, r.concurrency_limit,
                r.concurrency_order
            FROM tickwheel_execution_rows(shared_values, item_rows) AS r
            ORDER BY r.item_position
            ON CONFLICT DO NOTHING
            RETURNING e.execution_id, e.status
        )
        SELECT array_agg(i.execution_id), array_agg(i.status) INTO ids, statuses
        FROM inserted AS i;
    END;
    RETURN QUERY SELECT * FROM unnest(ids, statuses);
END
$$;
