-- The worker's hot path: claim READY executions, and report finished attempts, each batch in
-- one write transaction (one commit, so one fsync, per batch rather than per execution).
-- Fragments (store/sqlfile.py): the text the claims share, written once and taken in where a
-- line says `-- include: <fragment>`; each claim is still a statement of its own, and each
-- expands to the text it had when written out.
-- claim_lease: every claim's RUNNING update, up to the tokens.
-- ready_filters, ready_end: the tests of a READY row the plain and the fair claims may take, and
--   their end (a group takes no more than its free slots).
-- direct_filters, direct_end: the same for a due SCHEDULED row the direct and the ordered claims
--   may take.

-- fragment: claim_lease
UPDATE executions
SET status = 'RUNNING', attempt_count = attempt_count + 1, lease_owner = :worker_id,
    lease_expires_at = :lease_expires_at,
    fencing_token = (SELECT value FROM counters WHERE name = 'fencing_token') + c.position,

-- fragment: ready_filters
AND (:definition_uris IS NULL
     OR e.definition_uri IN (SELECT value FROM json_each(:definition_uris)))
-- Pauses (0017, docs/flow-control.md): a paused tenant or definition, or an
-- open circuit breaker, holds its READY rows back; a half-open breaker lets its
-- probe by.
-- The first test is run once: with no pause anywhere no row is probed.
AND (NOT EXISTS (SELECT 1 FROM pauses)
     OR NOT EXISTS (SELECT 1 FROM pauses p
                    WHERE p.tenant = e.tenant
                      AND p.definition_uri IN ('', e.definition_uri)
                      AND p.probe_execution_id IS NOT e.execution_id))
-- Rate limits (0020, docs/flow-control.md): a row under a bucket is claimed only
-- when the store's rate step names it (rate_ids, with tokens drawn). The first
-- test is run once: with no bucket anywhere no row is probed.
AND (:rate_ids IS NULL
     OR e.execution_id IN (SELECT value FROM json_each(:rate_ids)))
AND (:rate_ids IS NOT NULL OR NOT EXISTS (SELECT 1 FROM rate_limits)
     OR NOT EXISTS (SELECT 1 FROM rate_limits r
                    WHERE r.tenant = e.tenant
                      AND r.definition_uri IN ('', e.definition_uri)))
AND (e.concurrency_limit IS NULL
     OR ((SELECT count(*) FROM concurrency_holds h
          WHERE h.tenant = e.tenant AND h.definition_uri = e.definition_uri
            AND h.concurrency_key = e.concurrency_key) < e.concurrency_limit
         AND (e.concurrency_order <> 'fifo'
              -- SQLite cannot bound a correlated count by the row's limit: the
              -- usual limit 1 asks for any earlier one, a larger limit counts.
              OR (e.concurrency_limit = 1 AND NOT EXISTS (
              SELECT 1 FROM executions p
              WHERE p.concurrency_limit IS NOT NULL
                AND p.status IN ('SCHEDULED', 'READY', 'RUNNING', 'RETRY_WAIT')
                AND p.tenant = e.tenant AND p.definition_uri = e.definition_uri
                AND p.concurrency_key = e.concurrency_key
                AND (p.execute_at < e.execute_at
                     OR (p.execute_at = e.execute_at
                         AND p.execution_id < e.execution_id))))
              OR (e.concurrency_limit > 1 AND (
              SELECT count(*) FROM executions p
              WHERE p.concurrency_limit IS NOT NULL
                AND p.status IN ('SCHEDULED', 'READY', 'RUNNING', 'RETRY_WAIT')
                AND p.tenant = e.tenant AND p.definition_uri = e.definition_uri
                AND p.concurrency_key = e.concurrency_key
                AND (p.execute_at < e.execute_at
                     OR (p.execute_at = e.execute_at
                         AND p.execution_id < e.execution_id))
              ) < e.concurrency_limit))))

-- fragment: ready_end
    WHERE concurrency_limit IS NULL OR held + n <= concurrency_limit
) AS c
WHERE executions.execution_id = c.execution_id AND executions.status = 'READY'
RETURNING *;

-- fragment: direct_filters
WHERE l.due_through IS NOT NULL
  AND e.status = 'SCHEDULED' AND e.bucket_start <= l.due_through
  AND e.execute_at <= l.due_through AND e.concurrency_limit IS NULL
  AND (:definition_uris IS NULL
       OR e.definition_uri IN (SELECT value FROM json_each(:definition_uris)))
  AND (NOT EXISTS (SELECT 1 FROM pauses)
       OR NOT EXISTS (SELECT 1 FROM pauses p
                      WHERE p.tenant = e.tenant
                        AND p.definition_uri IN ('', e.definition_uri)))
  AND (NOT EXISTS (SELECT 1 FROM rate_limits)
       OR NOT EXISTS (SELECT 1 FROM rate_limits r
                      WHERE r.tenant = e.tenant
                        AND r.definition_uri IN ('', e.definition_uri)))

-- fragment: direct_end
    )
) AS c
WHERE executions.execution_id = c.execution_id AND executions.status = 'SCHEDULED'
RETURNING *;

-- name: execution_claim_ready
-- Runs inside BEGIN IMMEDIATE: no other claimer can interleave, so the tokens are the counter's
-- current value plus the claim position (1, 2, ...); the store then advances the counter by the
-- number claimed (fencing_token_next). The candidates are limited before they are numbered, so
-- a claim reads only `limit` entries of the READY index however long the queue is.
-- A worker that runs only some definitions names them (a JSON array); NULL means any.
-- An execution with a concurrency limit (docs/flow-control.md) is passed over while its group
-- holds `limit` slots or, with order fifo, while `limit` executions of its group that come before
-- it (executeAt, then id) have not finished; among the candidates of one group only as many as
-- the group has free slots are taken (n, their rank). The single writer makes these reads exact;
-- the store then records the slots taken (concurrency_hold_insert).
-- include: claim_lease
    started_at = coalesce(started_at, :now), updated_at = :now
FROM (
    SELECT execution_id, row_number() OVER (ORDER BY priority DESC, ready_at) AS position
    FROM (
        SELECT execution_id, priority, ready_at, concurrency_limit, held,
            row_number() OVER (PARTITION BY tenant, definition_uri, concurrency_key
                               ORDER BY priority DESC, ready_at, execution_id) AS n
        FROM (
            SELECT e.execution_id, e.priority, e.ready_at, e.tenant, e.definition_uri,
                e.concurrency_key, e.concurrency_limit,
                CASE WHEN e.concurrency_limit IS NULL THEN 0 ELSE (
                    SELECT count(*) FROM concurrency_holds h
                    WHERE h.tenant = e.tenant AND h.definition_uri = e.definition_uri
                      AND h.concurrency_key = e.concurrency_key) END AS held
            FROM executions e
            WHERE e.status = 'READY'
              -- include: ready_filters
            ORDER BY e.priority DESC, e.ready_at
            LIMIT :limit
        )
    )
-- include: ready_end

-- name: execution_claim_tenants_spread
-- Whether more than one tenant has READY work: the first and the last entry of
-- executions_ready_tenant (INDEXED BY: the (tenant, status) index would walk a tenant's finished
-- rows to its READY ones). Read in the claim's transaction, so exact.
SELECT (SELECT min(tenant) FROM executions INDEXED BY executions_ready_tenant
        WHERE status = 'READY')
    IS NOT (SELECT max(tenant) FROM executions INDEXED BY executions_ready_tenant
            WHERE status = 'READY') AS spread;

-- name: execution_claim_ready_fair
-- execution_claim_ready, fair across tenants: the store runs it instead while more than one
-- tenant has READY work (execution_claim_tenants_spread), so a single tenant's drain keeps the
-- plain statement (one walk of executions_ready; this one cost ~45% more per claim there).
-- Runs inside BEGIN IMMEDIATE: no other claimer can interleave, so the tokens are the counter's
-- current value plus the claim position (1, 2, ...); the store then advances the counter by the
-- number claimed (fencing_token_next). The candidates are limited before they are numbered, so
-- a claim reads at most `limit` entries of the READY index per tenant, however long the queue.
-- Fair across tenants (docs/flow-control.md, "Fair claiming"): tenants are the tenants with
-- READY work, found by a skip scan of executions_ready_tenant (one probe per tenant); each gives
-- its first `limit` claimable rows in claim order, and the batch takes the first of every tenant,
-- then the second of every tenant, and so on (turn), so a deep backlog takes one turn like a
-- single execution. Tokens follow that order (position).
-- A worker that runs only some definitions names them (a JSON array); NULL means any.
-- An execution with a concurrency limit (docs/flow-control.md) is passed over while its group
-- holds `limit` slots or, with order fifo, while `limit` executions of its group that come before
-- it (executeAt, then id) have not finished; among the candidates of one group only as many as
-- the group has free slots are taken (n, their rank). The single writer makes these reads exact;
-- the store then records the slots taken (concurrency_hold_insert).
WITH RECURSIVE tenants (tenant) AS (
    -- INDEXED BY: the (tenant, status) index would walk a tenant's finished rows to its READY.
    SELECT (SELECT min(tenant) FROM executions INDEXED BY executions_ready_tenant
            WHERE status = 'READY')
    UNION ALL
    SELECT (SELECT min(x.tenant) FROM executions x INDEXED BY executions_ready_tenant
            WHERE x.status = 'READY' AND x.tenant > t.tenant)
    FROM tenants t
    WHERE t.tenant IS NOT NULL
)
-- include: claim_lease
    started_at = coalesce(started_at, :now), updated_at = :now
FROM (
    SELECT execution_id, row_number() OVER (ORDER BY turn, priority DESC, ready_at) AS position
    FROM (
        SELECT execution_id, priority, ready_at, concurrency_limit, held, turn,
            row_number() OVER (PARTITION BY tenant, definition_uri, concurrency_key
                               ORDER BY priority DESC, ready_at, execution_id) AS n
        FROM (
          SELECT * FROM (
            SELECT e.execution_id, e.priority, e.ready_at, e.tenant, e.definition_uri,
                e.concurrency_key, e.concurrency_limit,
                CASE WHEN e.concurrency_limit IS NULL THEN 0 ELSE (
                    SELECT count(*) FROM concurrency_holds h
                    WHERE h.tenant = e.tenant AND h.definition_uri = e.definition_uri
                      AND h.concurrency_key = e.concurrency_key) END AS held,
                -- A tenant of weight w (tenant_weights, 0020; 1 when unset) takes w rows per
                -- turn.
                (row_number() OVER (PARTITION BY e.tenant ORDER BY e.priority DESC, e.ready_at)
                 - 1) / coalesce((SELECT w.weight FROM tenant_weights w
                                  WHERE w.tenant = e.tenant), 1)
                    AS turn
            FROM tenants t, executions e
            WHERE t.tenant IS NOT NULL AND e.execution_id IN (
            SELECT e.execution_id FROM executions e
            WHERE e.status = 'READY' AND e.tenant = t.tenant
              -- A paused tenant (no probe) is skipped whole, not probed row by row.
              AND NOT EXISTS (SELECT 1 FROM pauses p
                              WHERE p.tenant = t.tenant AND p.definition_uri = ''
                                AND p.probe_execution_id IS NULL)
              -- include: ready_filters
            ORDER BY e.priority DESC, e.ready_at
            LIMIT :limit)
          )
          ORDER BY turn, priority DESC, ready_at
          LIMIT :limit
        )
    )
-- include: ready_end

-- name: execution_claim_ordered
-- execution_claim_direct with the herd's rows walked in id order (docs/scaling.md, "The direct
-- claim in id order"), as on PostgreSQL: from the store's place in a herd (a tenant, and the id
-- after which to walk), the tenant's next SCHEDULED rows through executions_tenant_status, at
-- most four times the batch (the bound on the rows a claim may pass that it cannot take: rows
-- of the tenant due later, or of a shard not open), and of those the rows the direct claim may
-- take, in id order. Another tenant's rows are never read. Runs before execution_claim_direct,
-- which takes what this one leaves, in the claim's BEGIN IMMEDIATE (fencing_token_next between).
-- include: claim_lease
    ready_at = execute_at, started_at = coalesce(started_at, :now), updated_at = :now
FROM (
    SELECT execution_id, row_number() OVER (ORDER BY execution_id) AS position
    FROM (
        SELECT e.execution_id
        FROM (SELECT execution_id FROM executions INDEXED BY executions_tenant_status
              WHERE tenant = :tenant AND status = 'SCHEDULED' AND execution_id > :after
              ORDER BY execution_id
              LIMIT 4 * :limit) AS w
        JOIN executions e ON e.execution_id = w.execution_id
        JOIN shard_leases l ON l.shard_id = e.shard_id
        -- include: direct_filters
        ORDER BY e.execution_id
        LIMIT :limit
-- include: direct_end

-- name: concurrency_hold_insert
-- SQLite only (PostgreSQL takes its slots inside the claim statement): the slot a claimed
-- execution holds, the lowest free one of its group, in the claim's write transaction.
INSERT INTO concurrency_holds (tenant, definition_uri, concurrency_key, slot, execution_id)
SELECT :tenant, :definition_uri, :concurrency_key,
    CASE WHEN NOT EXISTS (
            SELECT 1 FROM concurrency_holds
            WHERE tenant = :tenant AND definition_uri = :definition_uri
              AND concurrency_key = :concurrency_key AND slot = 0) THEN 0
         ELSE (SELECT min(h.slot) + 1 FROM concurrency_holds h
               WHERE h.tenant = :tenant AND h.definition_uri = :definition_uri
                 AND h.concurrency_key = :concurrency_key
                 AND NOT EXISTS (
                     SELECT 1 FROM concurrency_holds n
                     WHERE n.tenant = h.tenant AND n.definition_uri = h.definition_uri
                       AND n.concurrency_key = h.concurrency_key AND n.slot = h.slot + 1))
    END,
    :execution_id;

-- name: fencing_token_next
-- SQLite only (PostgreSQL draws from a sequence inside its claim statement): moves the counter
-- past the tokens the claim just handed out, in the same write transaction.
UPDATE counters SET value = value + :n WHERE name = 'fencing_token';

-- name: attempt_insert
-- SQLite only (PostgreSQL writes the attempt rows inside its claim statement): the RUNNING
-- attempt of each execution just claimed (a JSON array of ids).
INSERT INTO attempts (execution_id, attempt_number, worker_id, fencing_token, status, started_at)
SELECT execution_id, attempt_count, lease_owner, fencing_token, 'RUNNING', :now
FROM executions
WHERE execution_id IN (SELECT value FROM json_each(:execution_ids)) AND status = 'RUNNING';

-- name: execution_finish_many
-- One row of a worker's batch (SQLite has no arrays: the store runs it per row, all in one write
-- transaction). The fencing guard: only the holder of the current token of a RUNNING execution
-- may finish it. The reaper's write must lose against a heartbeat that renewed the lease.
UPDATE executions
SET status = :status, output = :output, output_reference = :output_reference, error = :error,
    next_attempt_at = :next_attempt_at, lease_owner = NULL, lease_expires_at = NULL,
    finished_at = CASE WHEN :status IN ('SUCCEEDED', 'FAILED', 'CANCELLED') THEN :now END,
    updated_at = :now
WHERE execution_id = :execution_id AND status = 'RUNNING' AND fencing_token = :fencing_token
  AND (:lease_expired_only = 0 OR lease_expires_at < :now)
RETURNING attempt_count, idempotency_key, concurrency_limit IS NOT NULL AS frees_slot;

-- name: attempt_finish
UPDATE attempts SET status = :attempt_status, finished_at = :now, error = :error
WHERE execution_id = :execution_id AND attempt_number = :attempt_number
  AND fencing_token = :fencing_token AND status = 'RUNNING';

-- name: execution_claim_direct
-- The plain claim's second source (docs/scaling.md, "Claiming a herd without promoting it"), as
-- on PostgreSQL: when the READY rows did not fill the batch, the due SCHEDULED rows of the open
-- shards (shard_leases with a due_through, set by each shard's lease holder at an instant with
-- due executions), through executions_due up to the shard's due_through, straight to RUNNING,
-- their ready_at their executeAt. Only rows the scheduler left to the claims: no concurrency
-- limit, no pause, no rate limit over them. Runs inside the claim's BEGIN IMMEDIATE, after the
-- READY statement, so its tokens come after that statement's (fencing_token_next between).
-- include: claim_lease
    ready_at = execute_at, started_at = coalesce(started_at, :now), updated_at = :now
FROM (
    SELECT execution_id, row_number() OVER () AS position
    FROM (
        SELECT e.execution_id
        FROM shard_leases l INDEXED BY shard_leases_open
        JOIN executions e INDEXED BY executions_due ON e.shard_id = l.shard_id
        -- include: direct_filters
        LIMIT :limit
-- include: direct_end
