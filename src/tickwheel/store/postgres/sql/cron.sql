-- The Cron Service's tables (migrations 0002 and 0009). Policy lives in tickwheel.cron; these
-- queries only read and write, each change guarded by what it expects to find.

-- name: cron_job_insert
-- The (tenant, name) constraint decides whether the name is free, also against a concurrent
-- insert of the same name (ON CONFLICT waits for it, then skips).
INSERT INTO cron_jobs (
    cron_job_id, tenant, name, definition_uri, definition_version, inputs, expression, timezone,
    dst_policy, status, misfire_policy, max_catch_up, overlap_policy, jitter_seconds, start_at,
    end_at, next_run_at, last_occurrence, last_execution_id, version, created_at, updated_at,
    paused_at, workflow_name, workflow_version, last_workflow_run_id, label
) VALUES (
    %(cron_job_id)s, %(tenant)s, %(name)s, %(definition_uri)s, %(definition_version)s,
    %(inputs)s, %(expression)s, %(timezone)s, %(dst_policy)s, %(status)s, %(misfire_policy)s,
    %(max_catch_up)s, %(overlap_policy)s, %(jitter_seconds)s, %(start_at)s, %(end_at)s,
    %(next_run_at)s, %(last_occurrence)s, %(last_execution_id)s, %(version)s, %(created_at)s,
    %(updated_at)s, %(paused_at)s, %(workflow_name)s, %(workflow_version)s,
    %(last_workflow_run_id)s, %(label)s
)
ON CONFLICT (tenant, name) DO NOTHING;

-- name: cron_job_get
SELECT * FROM cron_jobs WHERE tenant = %(tenant)s AND cron_job_id = %(cron_job_id)s;

-- name: cron_job_get_by_name
SELECT * FROM cron_jobs WHERE tenant = %(tenant)s AND name = %(name)s;

-- name: cron_job_list
SELECT * FROM cron_jobs
WHERE tenant = %(tenant)s AND (%(after_name)s::text IS NULL OR name > %(after_name)s::text)
ORDER BY name
LIMIT %(limit)s;

-- name: cron_job_update
-- Optimistic concurrency: only the version the user read. The claim columns are left alone; the
-- new version makes a claiming instance's advance a no-op, and it releases its claim.
UPDATE cron_jobs
SET name = %(name)s, definition_uri = %(definition_uri)s,
    definition_version = %(definition_version)s, inputs = %(inputs)s,
    expression = %(expression)s, timezone = %(timezone)s, dst_policy = %(dst_policy)s,
    status = %(status)s, misfire_policy = %(misfire_policy)s, max_catch_up = %(max_catch_up)s,
    overlap_policy = %(overlap_policy)s, jitter_seconds = %(jitter_seconds)s,
    start_at = %(start_at)s, end_at = %(end_at)s, next_run_at = %(next_run_at)s,
    version = %(version)s, updated_at = %(updated_at)s, paused_at = %(paused_at)s,
    workflow_name = %(workflow_name)s, workflow_version = %(workflow_version)s,
    label = %(label)s
WHERE tenant = %(tenant)s AND cron_job_id = %(cron_job_id)s AND version = %(expected_version)s
RETURNING *;

-- name: cron_job_delete
DELETE FROM cron_jobs
WHERE tenant = %(tenant)s AND cron_job_id = %(cron_job_id)s AND version = %(expected_version)s;

-- name: cron_job_claim_due
-- Several `tickwheel cron` instances claim at once: SKIP LOCKED makes each take jobs the others
-- are not taking, and the re-check of the WHERE clause on the locked row refuses a job another
-- instance claimed and committed a moment ago. Jobs that forbid or replace overlapping runs are
-- due only at their occurrence (their overlap check must see the previous run's state at fire
-- time), and so are jobs that start workflow runs (a run starts when it is created); the others
-- a lead ahead. The database's clock decides unless the caller passes `now`.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
due AS (
    SELECT j.cron_job_id FROM cron_jobs j, clock
    WHERE j.status = 'ACTIVE'
      AND j.next_run_at <= clock.now + %(lead)s::interval
      AND ((j.overlap_policy = 'allow' AND j.workflow_name IS NULL)
           OR j.next_run_at <= clock.now)
      AND (j.claim_expires_at IS NULL OR j.claim_expires_at <= clock.now)
      AND (%(tenant)s::text IS NULL OR j.tenant = %(tenant)s::text)
    ORDER BY j.next_run_at
    LIMIT %(limit)s
    FOR UPDATE OF j SKIP LOCKED
)
UPDATE cron_jobs c
SET claimed_by = %(owner)s, claim_expires_at = clock.now + %(lease)s::interval
FROM due, clock
WHERE c.cron_job_id = due.cron_job_id
RETURNING c.cron_job_id, c.version, c.next_run_at, c.last_occurrence, c.last_execution_id,
    c.last_workflow_run_id, clock.now AS claimed_at;

-- name: cron_job_get_by_ids
-- The claim's jobs the store has not seen at their version, read in the claim's transaction
-- (their row locks are held: nobody changed them since).
SELECT j.* FROM unnest(%(cron_job_ids)s::uuid[]) AS i (cron_job_id)
JOIN cron_jobs j ON j.cron_job_id = i.cron_job_id;

-- name: cron_job_next_due
-- How long until cron_job_claim_due would find a job (its WHERE clause, turned into instants):
-- the Cron Service sleeps that long unless a change wakes it. Read once per idle round, not per
-- tick: a scan of the active jobs (6-7 ms at 10,000 on the loaded 2-core machine).
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now)
SELECT min(greatest(
           CASE WHEN j.overlap_policy = 'allow' AND j.workflow_name IS NULL
                THEN j.next_run_at - %(lead)s::interval ELSE j.next_run_at END,
           coalesce(j.claim_expires_at, '-infinity'::timestamptz)))
       - min(clock.now) AS wait
FROM cron_jobs j, clock
WHERE j.status = 'ACTIVE' AND j.next_run_at IS NOT NULL
  AND (%(tenant)s::text IS NULL OR j.tenant = %(tenant)s::text);

-- name: cron_job_release
UPDATE cron_jobs SET claimed_by = NULL, claim_expires_at = NULL
WHERE cron_job_id = %(cron_job_id)s AND claimed_by = %(owner)s;

-- name: cron_occurrence_list
SELECT o.* FROM cron_occurrences o JOIN cron_jobs j ON j.cron_job_id = o.cron_job_id
WHERE j.tenant = %(tenant)s AND o.cron_job_id = %(cron_job_id)s
  AND (%(before_occurrence)s::timestamptz IS NULL
       OR (o.occurrence, o.record_id)
          < (%(before_occurrence)s::timestamptz, %(before_record_id)s::bigint))
ORDER BY o.occurrence DESC, o.record_id DESC
LIMIT %(limit)s;

-- name: cron_audit_insert
INSERT INTO cron_audit (tenant, cron_job_id, name, action, actor, at, before, after)
VALUES (%(tenant)s, %(cron_job_id)s, %(name)s, %(action)s, %(actor)s, %(at)s, %(before)s,
    %(after)s);

-- name: cron_audit_list
SELECT * FROM cron_audit
WHERE tenant = %(tenant)s AND cron_job_id = %(cron_job_id)s
ORDER BY audit_id
LIMIT %(limit)s;

-- name: cron_job_lock_many
-- An advance of a whole tick's jobs (or a record of history rows outside a tick) takes their
-- row locks first, in id order (two instances and a user's edit never wait on each other in a
-- cycle), waiting for a delete in flight; the ids that come back still exist.
SELECT cron_job_id FROM cron_jobs
WHERE cron_job_id = ANY(%(cron_job_ids)s::uuid[])
ORDER BY cron_job_id
FOR UPDATE;

-- name: cron_occurrence_insert_many
-- History rows in one statement, each at most once. The rows come as one JSON array of objects
-- (json_to_recordset): encoding it is a C call, where psycopg dumps eight parameter arrays
-- element by element in Python (half the CPU of these parameters, measured).
INSERT INTO cron_occurrences (
    cron_job_id, occurrence, outcome, execution_id, execute_at, reason, recorded_at,
    workflow_run_id
)
SELECT r.cron_job_id, r.occurrence, r.outcome, r.execution_id, r.execute_at, r.reason,
    r.recorded_at, r.workflow_run_id
FROM json_to_recordset(%(rows)s::json) AS r (
    cron_job_id uuid, occurrence timestamptz, outcome text, execution_id uuid,
    execute_at timestamptz, reason text, recorded_at timestamptz, workflow_run_id uuid
)
ON CONFLICT (cron_job_id, occurrence, outcome) DO NOTHING;
-- name: cron_job_advance_many
-- cron_job_advance for a whole tick in one statement: each job guarded on its own (the claim
-- is ours, its version and next_run_at are those planned from); the ids that moved come back.
-- The advances come as one JSON array of objects, like the history rows.
UPDATE cron_jobs c
SET next_run_at = a.next_run_at,
    last_occurrence = coalesce(a.last_occurrence, c.last_occurrence),
    last_execution_id = CASE WHEN a.last_occurrence IS NULL THEN c.last_execution_id
        ELSE a.last_execution_id END,
    last_workflow_run_id = CASE WHEN a.last_occurrence IS NULL THEN c.last_workflow_run_id
        ELSE a.last_workflow_run_id END,
    claimed_by = NULL, claim_expires_at = NULL
FROM json_to_recordset(%(advances)s::json) AS a (
    cron_job_id uuid, expected_version integer, expected_next_run_at timestamptz,
    next_run_at timestamptz, last_occurrence timestamptz, last_execution_id uuid,
    last_workflow_run_id uuid
)
WHERE c.cron_job_id = a.cron_job_id AND c.claimed_by = %(owner)s
  AND c.version = a.expected_version
  AND c.next_run_at IS NOT DISTINCT FROM a.expected_next_run_at
RETURNING c.cron_job_id;
-- name: cron_job_release_many
UPDATE cron_jobs SET claimed_by = NULL, claim_expires_at = NULL
WHERE cron_job_id = ANY(%(cron_job_ids)s::uuid[]) AND claimed_by = %(owner)s;

-- name: cron_job_get_by_names
-- `cron apply`: only the jobs a file declares, never every stored job. A join, not
-- `name = ANY(array)`: once psycopg prepares the statement, the generic plan cannot hash a
-- parameter array, and each row was compared with every name (0.5 s a query at 20,000 jobs).
SELECT j.* FROM unnest(%(names)s::text[]) AS n (name)
JOIN cron_jobs j ON j.tenant = %(tenant)s AND j.name = n.name;

-- name: cron_job_names_by_label
-- `cron apply --prune`: the names of the apply's label (NULL: no label); the store leaves out
-- the declared ones in Python (an anti-join against a parameter array of 100,000 names planned
-- as a nested loop once psycopg prepared it).
SELECT name FROM cron_jobs
WHERE tenant = %(tenant)s AND label IS NOT DISTINCT FROM %(label)s::text;

-- name: cron_apply_begin
INSERT INTO cron_applies (tenant, apply_key, request_hash, result, started_at)
VALUES (%(tenant)s, %(apply_key)s, %(request_hash)s, NULL, %(now)s)
ON CONFLICT (tenant, apply_key) DO NOTHING;

-- name: cron_apply_get
SELECT * FROM cron_applies WHERE tenant = %(tenant)s AND apply_key = %(apply_key)s;

-- name: cron_apply_take_over
-- An apply whose first try died without a result (no finish, no abandon) for a while: a retry
-- takes it over, guarded by the start it saw.
UPDATE cron_applies SET started_at = %(now)s
WHERE tenant = %(tenant)s AND apply_key = %(apply_key)s AND result IS NULL
  AND started_at = %(seen_started_at)s;

-- name: cron_apply_finish
UPDATE cron_applies SET result = %(result)s
WHERE tenant = %(tenant)s AND apply_key = %(apply_key)s;

-- name: cron_apply_abandon
DELETE FROM cron_applies
WHERE tenant = %(tenant)s AND apply_key = %(apply_key)s AND result IS NULL;

-- name: cron_apply_forget
-- Results are kept a day: long enough for any retry.
DELETE FROM cron_applies WHERE tenant = %(tenant)s AND started_at < %(before)s;

-- name: cron_job_present
-- After a batch insert: which of the ids it tried are stored (a taken name skipped its job).
SELECT cron_job_id FROM cron_jobs WHERE cron_job_id = ANY(%(cron_job_ids)s::uuid[]);

-- name: cron_occurrence_prune
-- Retention: one bounded batch of history rows recorded before %(before)s, oldest first through
-- the primary key (record ids grow with time, so the scan stops at the first young rows). A
-- job's newest row (by occurrence, then record id) is always kept, so its history never turns
-- empty while the job exists. The batch is a CTE evaluated once (as for execution_prune); SKIP
-- LOCKED leaves a row another pruner holds to the next batch.
WITH batch AS MATERIALIZED (
    SELECT o.record_id FROM cron_occurrences o
    WHERE o.recorded_at < %(before)s::timestamptz
      AND EXISTS (
          SELECT 1 FROM cron_occurrences n
          WHERE n.cron_job_id = o.cron_job_id
            AND (n.occurrence, n.record_id) > (o.occurrence, o.record_id)
      )
    ORDER BY o.record_id
    LIMIT %(limit)s
    FOR UPDATE OF o SKIP LOCKED
)
DELETE FROM cron_occurrences
WHERE record_id = ANY (ARRAY(SELECT record_id FROM batch));

-- name: cron_occurrence_count_prunable
-- What cron_occurrence_prune would delete (a dry run).
SELECT count(*) AS n FROM cron_occurrences o
WHERE o.recorded_at < %(before)s::timestamptz
  AND EXISTS (
      SELECT 1 FROM cron_occurrences n
      WHERE n.cron_job_id = o.cron_job_id
        AND (n.occurrence, n.record_id) > (o.occurrence, o.record_id)
  );

-- name: cron_audit_prune
-- Retention: one bounded batch of audit rows written before %(before)s, oldest first.
WITH batch AS MATERIALIZED (
    SELECT audit_id FROM cron_audit
    WHERE at < %(before)s::timestamptz
    ORDER BY audit_id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM cron_audit
WHERE audit_id = ANY (ARRAY(SELECT audit_id FROM batch));

-- name: cron_audit_count_prunable
SELECT count(*) AS n FROM cron_audit WHERE at < %(before)s::timestamptz;

-- name: cron_job_delete_many
-- `cron apply --prune`: a thousand deletes in one statement, each guarded by the version the
-- apply read (a job changed meanwhile stays); the ids deleted come back.
DELETE FROM cron_jobs c
USING unnest(%(cron_job_ids)s::uuid[], %(expected_versions)s::integer[])
    AS d (cron_job_id, expected_version)
WHERE c.tenant = %(tenant)s AND c.cron_job_id = d.cron_job_id
  AND c.version = d.expected_version
RETURNING c.cron_job_id;
