-- The worker's hot path: claim READY executions, and report finished attempts. Each is one
-- statement per batch (data-modifying CTEs), because round trips and statements per execution
-- are what bound a worker's throughput.
-- Fragments (store/sqlfile.py): the text the claims share, written once and taken in where a
-- line says `-- include: <fragment>`; each claim is still a statement of its own, prepared and
-- planned alone, and each expands to the text it had when written out.
-- spread_and_candidates: the READY source of the unlimited, direct and ordered claims.
-- claimed_lease, claimed_returning, recorded: every claim's RUNNING update around the line a
--   claim of SCHEDULED rows adds (their ready_at), and its attempt rows.
-- direct_filters: the tests of a SCHEDULED row the direct and the ordered claims may take.
-- direct_claimed: what the direct and the ordered claims do with both sources' rows.

-- fragment: spread_and_candidates
WITH spread AS MATERIALIZED (
    -- The first and the last READY tenant: two probes of executions_ready_tenant.
    SELECT first_tenant, first_tenant IS DISTINCT FROM last_tenant AS tenants_seen,
        EXISTS (SELECT 1 FROM shard_leases WHERE due_through IS NOT NULL) AS open_seen
    FROM (SELECT (SELECT min(tenant) FROM executions WHERE status = 'READY') AS first_tenant,
                 (SELECT max(tenant) FROM executions WHERE status = 'READY') AS last_tenant
          OFFSET 0) AS ends  -- not pulled up: the first would then be read twice
),
candidates AS MATERIALIZED (
    SELECT execution_id, concurrency_limit FROM executions
    WHERE status = 'READY' AND tenant = (SELECT first_tenant FROM spread)
      AND (%(definition_uris)s::text[] IS NULL
           OR definition_uri = ANY (%(definition_uris)s::text[]))
      -- Pauses: as in execution_claim_ready.
      -- The first test runs once per statement (an InitPlan): with no pause anywhere, the
      -- usual case, no row is probed. Probing every row the walk reaches tripled the database's
      -- CPU per execution of the drain (0.11 to 0.33 ms, docs/scaling.md).
      AND (NOT EXISTS (SELECT 1 FROM pauses)
           OR NOT EXISTS (SELECT 1 FROM pauses p
                          WHERE p.tenant = executions.tenant
                            AND p.definition_uri IN ('', executions.definition_uri)
                            AND p.probe_execution_id IS DISTINCT FROM executions.execution_id
                          OFFSET 0))
      -- Rate limits: as in execution_claim_ready (rows under a bucket are the rate step's).
      AND (NOT EXISTS (SELECT 1 FROM rate_limits)
           OR NOT EXISTS (SELECT 1 FROM rate_limits r
                          WHERE r.tenant = executions.tenant
                            AND r.definition_uri IN ('', executions.definition_uri)
                          OFFSET 0))
    ORDER BY priority DESC, ready_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),

-- fragment: claimed_lease
UPDATE executions e
SET status = 'RUNNING', attempt_count = e.attempt_count + 1, lease_owner = %(worker_id)s,
    lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval,
    fencing_token = t.fencing_token,

-- fragment: claimed_returning
    started_at = coalesce(e.started_at, coalesce(%(now)s::timestamptz, now())),
    updated_at = coalesce(%(now)s::timestamptz, now())
FROM tokens t
WHERE e.execution_id = t.execution_id
-- The columns a worker reads (claimed_rows.py CLAIMED_COLUMNS, in its order), not e.*.
RETURNING e.execution_id, e.tenant, e.definition_uri, e.definition_version,
    e.input_snapshot, e.execute_at, e.priority, e.attempt_count, e.max_attempts, e.shard_id,
    e.bucket_start, e.created_at, e.updated_at, e.idempotency_key, e.ready_at,
    e.lease_expires_at, e.fencing_token, e.started_at, e.cancel_requested_at, e.checkpoint,
    e.trace_context, e.start_by, e.deadline, e.concurrency_key, e.concurrency_limit,
    e.concurrency_order

-- fragment: recorded
recorded AS (
    INSERT INTO attempts (execution_id, attempt_number, worker_id, fencing_token, status,
                          started_at)
    SELECT execution_id, attempt_count, %(worker_id)s, fencing_token, 'RUNNING',
        coalesce(%(now)s::timestamptz, now())
    FROM claimed
)

-- fragment: direct_filters
AND (%(definition_uris)s::text[] IS NULL
     OR e.definition_uri = ANY (%(definition_uris)s::text[]))
AND (NOT EXISTS (SELECT 1 FROM pauses) OR NOT EXISTS (SELECT 1 FROM pauses p
     WHERE p.tenant = e.tenant AND p.definition_uri IN ('', e.definition_uri)))
AND (NOT EXISTS (SELECT 1 FROM rate_limits) OR NOT EXISTS (SELECT 1 FROM rate_limits r
     WHERE r.tenant = e.tenant AND r.definition_uri IN ('', e.definition_uri)))

-- fragment: direct_claimed
tokens AS MATERIALIZED (
    SELECT c.execution_id, nextval('fencing_token_seq') AS fencing_token
    FROM (SELECT execution_id, concurrency_limit FROM candidates
          UNION ALL SELECT execution_id, concurrency_limit FROM direct) AS c
    WHERE c.concurrency_limit IS NULL AND NOT (SELECT tenants_seen FROM spread)
),
claimed AS (
    -- include: claimed_lease
        ready_at = CASE WHEN e.status = 'SCHEDULED' THEN e.execute_at ELSE e.ready_at END,
    -- include: claimed_returning
),
-- include: recorded
-- direct_n: how many rows the claim took from the second source (the last ones in token order);
-- the store's ordered walk starts from them (claims.py, DirectOrder).
SELECT claimed.*, seen.limited_seen, spread.tenants_seen, spread.open_seen,
    (SELECT count(*) FROM direct) AS direct_n
FROM (SELECT count(*) AS limited_seen FROM candidates WHERE concurrency_limit IS NOT NULL) AS seen
CROSS JOIN spread
LEFT JOIN claimed ON true
ORDER BY claimed.fencing_token;

-- name: execution_claim_ready
-- One statement, so one round trip and its own transaction (the pool is autocommit).
-- tenants: those with READY work, by a skip scan of executions_ready_tenant (a recursive CTE:
--   one probe for the next tenant after the last), so a tenant's backlog is never read through.
--   Read as an array (unnest): the planner then counts 10 tenants, not the 100 it assumes of a
--   recursive CTE, which priced the claim past jit_above_cost, and JIT compilation added ~50 ms
--   to a claim of ~1.5 ms.
-- candidates: fair across tenants (docs/flow-control.md, "Fair claiming"): per tenant, its first
--   `limit` claimable rows in claim order, walked from executions_ready_tenant; then the first
--   of every tenant, then the second of every tenant, and so on (turn), up to `limit`. A tenant
--   with 100,000 READY rows thus takes one turn like a tenant with one. Rows locked beyond the
--   batch stay READY (their locks end with the statement); at most tenants x `limit` are read.
--   SKIP LOCKED: concurrent claimers take disjoint rows instead of queueing behind each other,
--   and a row a cancel has locked is left to the cancel. A worker that runs only some
--   definitions names them; NULL means any.
--   An execution with a concurrency limit (docs/flow-control.md) is passed over while its group
--   holds `limit` slots, or, with order fifo, while `limit` executions of its group that come
--   before it (executeAt, then id: submission order) have not finished: SCHEDULED, READY,
--   RUNNING or RETRY_WAIT (a retry keeps its place). Both are read in this statement's snapshot,
--   which can only be behind: a slot freed or a predecessor finished since is seen next claim.
--   An execution without a limit stops at `concurrency_limit IS NULL`: a CASE, so that the test
--   comes first and the planner keeps its estimate of the scan (as an OR of subqueries, it
--   read and sorted every READY row instead of walking the index to the batch).
--   The store never prepares this statement (claims.py says why).
-- ranked: among the candidates of one group, their order; the n-th takes the n-th slot free in
--   the snapshot.
-- held: the slots, taken by INSERT ... ON CONFLICT DO NOTHING on the group's primary key. This is
--   what makes the limit exact under READ COMMITTED: a slot another claimer took meanwhile
--   (committed, or still in flight: the insert waits for it) conflicts, and the candidate is
--   left READY for a later claim. Rows go in key order, so claimers never wait on each other in
--   a cycle; finishers only delete their own hold rows (the executions_concurrency_release
--   trigger), so they wait on no claimer.
-- tokens: one nextval per candidate claimed, drawn while the materialised candidates are scanned
--   in claim order, so tokens ascend in claim order. The sequence is shared by every claimer and
--   never goes back: a later claim of an execution always carries a larger token than any
--   earlier claim of it (the earlier claim committed before the row could be READY again).
-- claimed: by primary key from the locked candidates, with no status predicate on purpose. The
--   candidates' FOR UPDATE re-checked each row's status on its newest version and holds the lock,
--   so the row is READY here. A status predicate would let the planner drive the join from a READY
--   index, and READY is a state statistics rarely see (ANALYZE finds none):
--   estimated at one row, it walked every READY row per claim (78 ms with 19,000 READY among 10 M
--   stored, against 1.5 ms by primary key). Lease times come from the database clock unless the
--   caller passes now (tests).
-- recorded: the RUNNING attempt row, written once, in the same statement.
WITH RECURSIVE tenants (tenant) AS (
    (SELECT tenant FROM executions WHERE status = 'READY' ORDER BY tenant LIMIT 1)
    UNION ALL
    SELECT (SELECT e.tenant FROM executions e
            WHERE e.status = 'READY' AND e.tenant > t.tenant
            ORDER BY e.tenant LIMIT 1)
    FROM tenants t
    WHERE t.tenant IS NOT NULL
),
candidates AS MATERIALIZED (
    SELECT f.execution_id, f.tenant, f.definition_uri, f.concurrency_key, f.concurrency_limit,
        f.priority, f.ready_at
    FROM (
    -- A tenant of weight w (tenant_weights, 0020; 1 when unset) takes w rows per turn.
    SELECT c.*, (row_number() OVER (PARTITION BY c.tenant ORDER BY c.priority DESC, c.ready_at)
                 - 1) / coalesce((SELECT w.weight FROM tenant_weights w
                                  WHERE w.tenant = c.tenant), 1)
        AS turn
    FROM unnest(ARRAY(SELECT tenant FROM tenants WHERE tenant IS NOT NULL)) AS t (tenant)
    CROSS JOIN LATERAL (
    SELECT e.execution_id, e.tenant, e.definition_uri, e.concurrency_key, e.concurrency_limit,
        e.priority, e.ready_at
    FROM executions e
    WHERE e.status = 'READY' AND e.tenant = t.tenant
      -- A paused tenant (no probe) is skipped whole: a test of the tenant alone (a one-time
      -- filter), rather than a probe of each of its READY rows on every claim.
      AND NOT EXISTS (SELECT 1 FROM pauses p
                      WHERE p.tenant = t.tenant AND p.definition_uri = ''
                        AND p.probe_execution_id IS NULL)
      AND (%(definition_uris)s::text[] IS NULL
           OR e.definition_uri = ANY (%(definition_uris)s::text[]))
      -- Pauses (0017, docs/flow-control.md): a paused tenant or definition, or an open circuit
      -- breaker, holds its READY rows back; a half-open breaker lets its one probe through.
      -- OFFSET 0 keeps this a per-row probe of the pauses key (usually an empty table) run only
      -- for the rows the index walk reaches; as an anti-join the planner hashed every READY row.
      -- The first test runs once per statement (an InitPlan): with no pause anywhere, the
      -- usual case, no row is probed. Probing every row the walk reaches tripled the database's
      -- CPU per execution of the drain (0.11 to 0.33 ms, docs/scaling.md).
      AND (NOT EXISTS (SELECT 1 FROM pauses)
           OR NOT EXISTS (SELECT 1 FROM pauses p
                          WHERE p.tenant = e.tenant
                            AND p.definition_uri IN ('', e.definition_uri)
                            AND p.probe_execution_id IS DISTINCT FROM e.execution_id
                          OFFSET 0))
      -- Rate limits (0020, docs/flow-control.md): a row under a bucket is claimed only when the
      -- store's rate step names it (rate_ids, with tokens drawn); otherwise passed over. The
      -- first test runs once per statement: with no bucket anywhere no row is probed.
      AND (%(rate_ids)s::uuid[] IS NULL OR e.execution_id = ANY (%(rate_ids)s::uuid[]))
      AND (%(rate_ids)s::uuid[] IS NOT NULL OR NOT EXISTS (SELECT 1 FROM rate_limits)
           OR NOT EXISTS (SELECT 1 FROM rate_limits r
                          WHERE r.tenant = e.tenant
                            AND r.definition_uri IN ('', e.definition_uri)
                          OFFSET 0))
      AND CASE WHEN e.concurrency_limit IS NULL THEN true ELSE
          (SELECT count(*) FROM concurrency_holds h
           WHERE h.tenant = e.tenant AND h.definition_uri = e.definition_uri
             AND h.concurrency_key = e.concurrency_key) < e.concurrency_limit
          AND (e.concurrency_order <> 'fifo'
               OR (SELECT count(*) FROM (
                       SELECT 1 FROM executions p
                       WHERE p.concurrency_limit IS NOT NULL
                         AND p.status IN ('SCHEDULED', 'READY', 'RUNNING', 'RETRY_WAIT')
                         AND p.tenant = e.tenant AND p.definition_uri = e.definition_uri
                         AND p.concurrency_key = e.concurrency_key
                         AND (p.execute_at, p.execution_id) < (e.execute_at, e.execution_id)
                       LIMIT e.concurrency_limit) AS earlier) < e.concurrency_limit)
          END
    ORDER BY e.priority DESC, e.ready_at
    LIMIT %(limit)s
    FOR UPDATE OF e SKIP LOCKED
    ) AS c
    ) AS f
    ORDER BY f.turn, f.priority DESC, f.ready_at
    LIMIT %(limit)s
),
ranked AS (
    SELECT c.execution_id, c.tenant, c.definition_uri, c.concurrency_key, c.concurrency_limit,
        row_number() OVER (PARTITION BY c.tenant, c.definition_uri, c.concurrency_key
                           ORDER BY c.priority DESC, c.ready_at, c.execution_id) AS n
    FROM candidates c
    WHERE c.concurrency_limit IS NOT NULL
),
held AS (
    INSERT INTO concurrency_holds (tenant, definition_uri, concurrency_key, slot, execution_id)
    SELECT r.tenant, r.definition_uri, r.concurrency_key, free.slot, r.execution_id
    FROM ranked r
    CROSS JOIN LATERAL (
        SELECT g.slot FROM generate_series(0, r.concurrency_limit - 1) AS g (slot)
        WHERE NOT EXISTS (
            SELECT 1 FROM concurrency_holds h
            WHERE h.tenant = r.tenant AND h.definition_uri = r.definition_uri
              AND h.concurrency_key = r.concurrency_key AND h.slot = g.slot)
        ORDER BY g.slot
        OFFSET r.n - 1 LIMIT 1
    ) AS free
    ORDER BY 1, 2, 3, 4
    ON CONFLICT DO NOTHING
    RETURNING execution_id
),
tokens AS MATERIALIZED (
    SELECT c.execution_id, nextval('fencing_token_seq') AS fencing_token FROM candidates c
    WHERE c.concurrency_limit IS NULL
       OR c.execution_id IN (SELECT held.execution_id FROM held)
),
claimed AS (
    -- include: claimed_lease
    -- include: claimed_returning
),
-- include: recorded
SELECT * FROM claimed ORDER BY fencing_token;

-- name: execution_claim_ready_unlimited
-- The claim while no execution under a concurrency limit is in sight: the statement of before
-- limits, which the store prepares (a plan made once), and which claims no execution that has
-- a limit. Such a candidate is locked for the statement's duration and left READY; limited_seen
-- (on every row, and on one row of NULLs when nothing was claimed) tells the store, which then
-- claims through execution_claim_ready for a while (claims.py). Likewise, when more than one
-- tenant has READY work (spread: the first and the last entry of executions_ready_tenant, two
-- index probes) it claims nothing and says so in tenants_seen, and the store claims through
-- execution_claim_ready, which takes a fair share from each tenant (docs/flow-control.md, "Fair
-- claiming"). So a single tenant's drain keeps this plan. open_seen: whether a shard is open to
-- the claims (a herd's instant, docs/scaling.md "Claiming a herd without promoting it"): the
-- store then claims through execution_claim_ready_direct, which also takes the due SCHEDULED
-- rows of open shards, until none is open. Everything below is unchanged:
-- One statement, so one round trip and its own transaction (the pool is autocommit).
-- candidates: served by the executions_ready_tenant partial index from the first READY tenant
--   (spread), already in claim order (no SCHEDULED or finished row is ever visited). The claim
--   takes nothing while several tenants are READY, so for the rows it takes that tenant's order
--   is the order over all READY rows (migration 0023: no second index over the READY rows).
--   SKIP LOCKED: concurrent claimers take disjoint rows instead of queueing behind each other,
--   and a row a cancel has locked is left to the cancel. A worker that runs only some
--   definitions names them; NULL means any.
-- tokens: one nextval per candidate, drawn while the materialised candidates are scanned in claim
--   order, so tokens ascend in claim order. The sequence is shared by every claimer and never goes
--   back: a later claim of an execution always carries a larger token than any earlier claim of
--   it (the earlier claim committed before the row could be READY again).
-- claimed: by primary key from the locked candidates, with no status predicate on purpose. The
--   candidates' FOR UPDATE re-checked each row's status on its newest version and holds the lock,
--   so the row is READY here. A status predicate would let the planner drive the join from a READY
--   index, and READY is a state statistics rarely see (ANALYZE finds none):
--   estimated at one row, it walked every READY row per claim (78 ms with 19,000 READY among 10 M
--   stored, against 1.5 ms by primary key). Lease times come from the database clock unless the
--   caller passes now (tests).
-- recorded: the RUNNING attempt row, written once, in the same statement.
-- include: spread_and_candidates
tokens AS MATERIALIZED (
    SELECT execution_id, nextval('fencing_token_seq') AS fencing_token FROM candidates
    WHERE concurrency_limit IS NULL AND NOT (SELECT tenants_seen FROM spread)
),
claimed AS (
    -- include: claimed_lease
    -- include: claimed_returning
),
-- include: recorded
SELECT claimed.*, seen.limited_seen, spread.tenants_seen, spread.open_seen
FROM (SELECT count(*) AS limited_seen FROM candidates WHERE concurrency_limit IS NOT NULL) AS seen
CROSS JOIN spread
LEFT JOIN claimed ON true
ORDER BY claimed.fencing_token;

-- name: execution_claim_ready_direct
-- execution_claim_ready_unlimited with a second source, run while shards are open to the claims
-- (open_seen; docs/scaling.md, "Claiming a herd without promoting it"). A statement of its own:
-- the planning of the second source (the store plans this claim at every run) added 0.3-1.4 ms
-- to every claim of a drain, where no shard is open. The rest is as in that statement.
-- direct: when the READY rows do not fill the batch, the rest comes from the due SCHEDULED rows
--   of the open shards (shard_leases with a due_through, set by each shard's lease holder at a
--   herd's instant, never past the database's clock): through executions_due, up to the shard's
--   due_through, shard after shard until the batch is full, earliest due first within a shard,
--   straight to RUNNING; their ready_at becomes their executeAt. The walk starts at shard :walk,
--   where the store's last direct claim took its last row; a claim it leaves short is sent
--   again from shard 0 (claims.py, _walk_from: from shard 0 every claim passed every shard the
--   claims had emptied; docs/scaling.md, "The direct claim's walk").
-- walk_open: the open shards from :walk, as one array, and their latest due_through. The walk
--   probes executions_due for those shards (shard_id = ANY, one descent each, in index order,
--   which is the ORDER BY), bounded by that instant, and compares each row with its own shard's
--   due_through (a probe of the lease row by primary key). It was a join of the lease rows to
--   executions, and a generic plan on statistics that saw few SCHEDULED rows and every shard
--   open (a herd's instant: autovacuum analyzes the lease table every few renewals) put
--   executions outside: every SCHEDULED row read through executions_tenant_status or the whole
--   of executions_due, a backlog due next month included, each probing its lease
--   (tests/store/test_plans_direct.py). A lock's re-check of a row another claim took meanwhile
--   (EvalPlanQual) re-runs only that row's probe; a UNION ALL of ordered lease subqueries, before
--   the join, was re-run whole (1,024 lease rows a re-check, and a herd's claims ran for
--   minutes). Only rows the scheduler left to this claim
--   (execution_promote_ids_fenced, direct): no concurrency limit, no pause, no rate limit over
--   them. The lock re-checks SCHEDULED on the newest version (a cancel or a promotion that took
--   the row first wins), and rows a cancel holds are skipped, as READY ones are.
-- include: spread_and_candidates
walk_open AS MATERIALIZED (
    SELECT array_agg(shard_id) AS shards, max(due_through) AS through
    FROM shard_leases WHERE due_through IS NOT NULL AND shard_id >= %(walk)s::int2
),
direct AS MATERIALIZED (
    SELECT e.execution_id, e.concurrency_limit
    FROM executions e
    WHERE e.shard_id = ANY ((SELECT shards FROM walk_open)::int2[])
      AND e.status = 'SCHEDULED' AND e.concurrency_limit IS NULL
      AND e.bucket_start <= (SELECT through FROM walk_open)
      AND e.execute_at <= (SELECT through FROM walk_open)
      AND e.execute_at <= (SELECT l.due_through FROM shard_leases l
                           WHERE l.shard_id = e.shard_id)
      -- include: direct_filters
    ORDER BY e.shard_id, e.bucket_start, e.execute_at
    LIMIT greatest(%(limit)s - (SELECT count(*) FROM candidates), 0)
    FOR UPDATE OF e SKIP LOCKED
),
-- include: direct_claimed

-- name: execution_claim_ready_ordered
-- execution_claim_ready_direct with the herd's rows walked in id order instead of shard by shard
-- (docs/scaling.md, "The direct claim in id order"). The direct claim writes its rows in the
-- order of a shard's rows, which the shard hash spreads over the whole herd: 80 rows on ~80 heap
-- pages and ~80 leaves of every index the update writes, 80-92 us of the database's CPU a row
-- against 51-55 for READY rows inserted together. In id order (insertion order) a claim's rows
-- share pages. The store sends this statement while it has a place in a herd (a tenant and the
-- id after which to walk, learnt from the rows its last direct claims took) and the direct one
-- for what it leaves.
-- walked: the next SCHEDULED rows of that tenant after that id, through executions_tenant_status
--   (tenant, status, execution_id), in id order, at most four times the rows the batch still
--   needs: the bound on the rows a claim may pass that it cannot take (rows of the tenant due
--   later, of shards not open). Another tenant's rows are never read. Not locked: a row not due
--   must not be locked (the lock writes its tuple).
-- direct: of those, the rows the direct claim may take, by primary key in id order: due by
--   their shard's due_through (a probe of its lease row per row; bucket_start <= execute_at),
--   SCHEDULED, no concurrency limit, no pause, no rate limit. FOR UPDATE SKIP LOCKED re-checks
--   all of it on the newest version (a cancel or a promotion that took the row first wins), as
--   the direct claim's; the walk is the CTE's, not re-run by a re-check. The status is compared
--   in the "C" collation (the same test) so that the planner cannot match it to the predicate of
--   executions_due and scan that index whole for the walk's ids: it did, with statistics of a
--   table analyzed while empty (a new database), 2,976 entries and a sort for a batch of 16.
-- The rest is the direct claim's, unchanged; direct_n as there.
-- include: spread_and_candidates
walked AS MATERIALIZED (
    SELECT execution_id FROM executions
    WHERE tenant = %(tenant)s::text AND status = 'SCHEDULED' AND execution_id > %(after)s::uuid
    ORDER BY execution_id
    LIMIT 4 * greatest(%(limit)s - (SELECT count(*) FROM candidates), 0)
),
direct AS MATERIALIZED (
    SELECT e.execution_id, e.concurrency_limit
    FROM executions e
    WHERE e.execution_id = ANY (ARRAY(SELECT execution_id FROM walked))
      AND e.status = 'SCHEDULED' COLLATE "C" AND e.concurrency_limit IS NULL
      AND e.execute_at <= (SELECT l.due_through FROM shard_leases l
                           WHERE l.shard_id = e.shard_id)
      -- include: direct_filters
    ORDER BY e.execution_id
    LIMIT greatest(%(limit)s - (SELECT count(*) FROM candidates), 0)
    FOR UPDATE OF e SKIP LOCKED
),
-- include: direct_claimed

-- name: execution_finish_many
-- A worker's batch of finished attempts, as one JSON array of objects (one per result), sorted by
-- execution id by the store so that overlapping batches lock rows in one order. One JSON text is
-- far cheaper for the worker to encode than nine parallel arrays dumped element by element, and
-- jsonb_to_recordset types every field (a JSON null is SQL NULL).
-- The fencing guard, per row: only the holder of the current token of a RUNNING execution may
-- finish it; a stale row matches nothing here and the others still commit. The reaper's write
-- (lease_expired_only) must lose against a heartbeat that renewed the lease meanwhile: the
-- heartbeat's UPDATE holds the row lock, and this one re-checks the lease on the new version.
-- skip_prefix (the store's one-statement path, outside a transaction): rows whose idempotency
-- key starts with it (workflow task runs, whose outbox row must commit with the finish) are left
-- untouched and come back unfinished, for the store to finish them in a transaction. NULL: none.
-- The ids, once more as an array (an InitPlan): the rows are then found by primary key whatever
-- the statistics say. Joined to the batch alone, with the status guard implying the predicate
-- of executions_running_lease, a table never analyzed (RUNNING priced at half a percent of its
-- rows) had every RUNNING row hashed to join the batch: 3,000 rows read for 30 results.
-- The status guard is compared in the "C" collation (the same test: text equality does not
-- depend on a deterministic collation), so that the planner cannot match it to the predicate of
-- executions_running_lease and use that index at all. A generic plan made while the table was
-- new (warm_claims prepares this at a worker's start, on an empty table; or a table of a few
-- thousand rows, never analyzed) walked that index, every RUNNING row and its heap tuple, to
-- find the batch: 2,000 rows read for a batch of 16, kept until the table's next ANALYZE.
-- recorded: the attempt row of each execution finished, in the same statement. Its ids too as
-- an array, for the same reason: a worker that started while attempts was empty and analyzed so
-- (pruned, then vacuumed: "no rows", not "unknown") kept a generic plan that walked the whole
-- primary key of attempts for every batch, every attempt row ever made for 16 (a finish took
-- 0.6-1.6 s in B4, tests/store/test_plans_unanalyzed.py).
-- woken: when a finished execution had a concurrency limit, its slot came free (the trigger of
-- migration 0018 deleted its hold row) and the next of its group may start: one NOTIFY to the
-- workers, delivered at the commit, so that they claim now rather than at their next poll.
WITH finished AS (
    UPDATE executions e
    SET status = b.status, output = b.output, output_reference = b.output_reference,
        error = b.error, next_attempt_at = b.next_attempt_at, lease_owner = NULL,
        lease_expires_at = NULL,
        finished_at = CASE WHEN b.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
            THEN coalesce(%(now)s::timestamptz, now()) END,
        updated_at = coalesce(%(now)s::timestamptz, now())
    FROM jsonb_to_recordset(%(batch)s::jsonb)
         AS b (execution_id uuid, fencing_token bigint, status text, attempt_status text,
               output jsonb, output_reference text, error jsonb, next_attempt_at timestamptz,
               lease_expired_only boolean)
    WHERE e.execution_id = b.execution_id AND e.status = 'RUNNING' COLLATE "C"
      AND e.execution_id = ANY (ARRAY(SELECT (j ->> 'execution_id')::uuid
                                      FROM jsonb_array_elements(%(batch)s::jsonb) AS j))
      AND e.fencing_token = b.fencing_token
      AND (NOT b.lease_expired_only OR e.lease_expires_at < coalesce(%(now)s::timestamptz, now()))
      AND (%(skip_prefix)s::text IS NULL OR e.idempotency_key IS NULL
           OR NOT starts_with(e.idempotency_key, %(skip_prefix)s::text))
    RETURNING e.execution_id, e.fencing_token, e.attempt_count, e.idempotency_key, e.status,
        b.attempt_status, b.error, e.concurrency_limit
),
recorded AS (
    UPDATE attempts a
    SET status = f.attempt_status, finished_at = coalesce(%(now)s::timestamptz, now()),
        error = f.error
    FROM finished f
    WHERE a.execution_id = f.execution_id AND a.attempt_number = f.attempt_count
      AND a.execution_id = ANY (ARRAY(SELECT execution_id FROM finished))
      AND a.fencing_token = f.fencing_token AND a.status = 'RUNNING'
),
woken AS (
    SELECT pg_notify(%(ready_channel)s, %(origin)s)
    WHERE EXISTS (SELECT 1 FROM finished WHERE concurrency_limit IS NOT NULL)
)
SELECT execution_id, fencing_token, attempt_count, idempotency_key, status,
    concurrency_limit IS NOT NULL AS frees_slot, (SELECT count(*) FROM woken) AS woken
FROM finished;

-- name: attempt_finish
-- One attempt row (a graceful shutdown's release).
UPDATE attempts
SET status = %(attempt_status)s, finished_at = coalesce(%(now)s::timestamptz, now()),
    error = %(error)s
WHERE execution_id = %(execution_id)s AND attempt_number = %(attempt_number)s
  AND fencing_token = %(fencing_token)s AND status = 'RUNNING';
