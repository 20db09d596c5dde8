-- The Cron Service's tables (migrations 0002 and 0009). Policy lives in tickwheel.cron; these
-- queries only read and write, each change guarded by what it expects to find.

-- name: cron_job_insert
-- The (tenant, name) constraint decides whether the name is free.
INSERT INTO cron_jobs (
    cron_job_id, tenant, name, definition_uri, definition_version, inputs, expression, timezone,
    dst_policy, status, misfire_policy, max_catch_up, overlap_policy, jitter_seconds, start_at,
    end_at, next_run_at, last_occurrence, last_execution_id, version, created_at, updated_at,
    paused_at, workflow_name, workflow_version, last_workflow_run_id, label
) VALUES (
    :cron_job_id, :tenant, :name, :definition_uri, :definition_version, :inputs, :expression,
    :timezone, :dst_policy, :status, :misfire_policy, :max_catch_up, :overlap_policy,
    :jitter_seconds, :start_at, :end_at, :next_run_at, :last_occurrence, :last_execution_id,
    :version, :created_at, :updated_at, :paused_at, :workflow_name, :workflow_version,
    :last_workflow_run_id, :label
)
ON CONFLICT (tenant, name) DO NOTHING;

-- name: cron_job_get
SELECT * FROM cron_jobs WHERE tenant = :tenant AND cron_job_id = :cron_job_id;

-- name: cron_job_get_by_name
SELECT * FROM cron_jobs WHERE tenant = :tenant AND name = :name;

-- name: cron_job_list
SELECT * FROM cron_jobs
WHERE tenant = :tenant AND (:after_name IS NULL OR name > :after_name)
ORDER BY name
LIMIT :limit;

-- name: cron_job_update
-- Optimistic concurrency: only the version the user read. The claim columns are left alone; the
-- new version makes a claiming instance's advance a no-op, and it releases its claim.
UPDATE cron_jobs
SET name = :name, definition_uri = :definition_uri, definition_version = :definition_version,
    inputs = :inputs, expression = :expression, timezone = :timezone, dst_policy = :dst_policy,
    status = :status, misfire_policy = :misfire_policy, max_catch_up = :max_catch_up,
    overlap_policy = :overlap_policy, jitter_seconds = :jitter_seconds, start_at = :start_at,
    end_at = :end_at, next_run_at = :next_run_at, version = :version, updated_at = :updated_at,
    paused_at = :paused_at, workflow_name = :workflow_name, workflow_version = :workflow_version,
    label = :label
WHERE tenant = :tenant AND cron_job_id = :cron_job_id AND version = :expected_version
RETURNING *;

-- name: cron_job_delete
DELETE FROM cron_jobs
WHERE tenant = :tenant AND cron_job_id = :cron_job_id AND version = :expected_version;

-- name: cron_job_claim_due
-- Runs inside BEGIN IMMEDIATE: the write lock makes the select-then-update one step, so two
-- processes sharing the file never claim the same job. Jobs that forbid or replace overlapping
-- runs are due only at their occurrence (their overlap check must see the previous run's state
-- at fire time), and so are jobs that start workflow runs (a run starts when it is created);
-- the others a lead ahead.
UPDATE cron_jobs
SET claimed_by = :owner, claim_expires_at = :claim_expires_at
WHERE cron_job_id IN (
    SELECT cron_job_id FROM cron_jobs
    WHERE status = 'ACTIVE'
      AND next_run_at <= :horizon
      AND ((overlap_policy = 'allow' AND workflow_name IS NULL) OR next_run_at <= :now)
      AND (claim_expires_at IS NULL OR claim_expires_at <= :now)
      AND (:tenant IS NULL OR tenant = :tenant)
    ORDER BY next_run_at
    LIMIT :limit
)
RETURNING *;

-- name: cron_job_next_due
-- When cron_job_claim_due would next find a job (its WHERE clause, turned into instants, in
-- microseconds): the Cron Service sleeps until then unless a change wakes it.
SELECT min(max(
           CASE WHEN overlap_policy = 'allow' AND workflow_name IS NULL
                THEN next_run_at - :lead ELSE next_run_at END,
           coalesce(claim_expires_at, next_run_at - :lead))) AS due
FROM cron_jobs
WHERE status = 'ACTIVE' AND next_run_at IS NOT NULL AND (:tenant IS NULL OR tenant = :tenant);

-- name: cron_job_release
UPDATE cron_jobs SET claimed_by = NULL, claim_expires_at = NULL
WHERE cron_job_id = :cron_job_id AND claimed_by = :owner;

-- name: cron_occurrence_list
SELECT o.* FROM cron_occurrences o JOIN cron_jobs j ON j.cron_job_id = o.cron_job_id
WHERE j.tenant = :tenant AND o.cron_job_id = :cron_job_id
  AND (:before_occurrence IS NULL OR o.occurrence < :before_occurrence
       OR (o.occurrence = :before_occurrence AND o.record_id < :before_record_id))
ORDER BY o.occurrence DESC, o.record_id DESC
LIMIT :limit;

-- name: cron_audit_insert
INSERT INTO cron_audit (tenant, cron_job_id, name, action, actor, at, before, after)
VALUES (:tenant, :cron_job_id, :name, :action, :actor, :at, :before, :after);

-- name: cron_audit_list
SELECT * FROM cron_audit
WHERE tenant = :tenant AND cron_job_id = :cron_job_id
ORDER BY audit_id
LIMIT :limit;

-- name: cron_job_lock_many
-- The write transaction already holds the database lock; which of the jobs (a tick's, or those
-- history rows are recorded for) still exist (:cron_job_ids is a JSON array of ids).
SELECT cron_job_id FROM cron_jobs
WHERE cron_job_id IN (SELECT value FROM json_each(:cron_job_ids))
ORDER BY cron_job_id;

-- name: cron_occurrence_insert_many
-- History rows, each at most once: SQLite runs it once per row (executemany) inside the
-- caller's one transaction.
INSERT INTO cron_occurrences (
    cron_job_id, occurrence, outcome, execution_id, execute_at, reason, recorded_at,
    workflow_run_id
) VALUES (
    :cron_job_id, :occurrence, :outcome, :execution_id, :execute_at, :reason, :recorded_at,
    :workflow_run_id
)
ON CONFLICT (cron_job_id, occurrence, outcome) DO NOTHING;

-- name: cron_job_advance_many
-- cron_job_advance, run once per job (executemany) inside one transaction for the whole tick;
-- RETURNING says which jobs moved.
UPDATE cron_jobs
SET next_run_at = :next_run_at,
    last_occurrence = coalesce(:last_occurrence, last_occurrence),
    last_execution_id = CASE WHEN :last_occurrence IS NULL THEN last_execution_id
        ELSE :last_execution_id END,
    last_workflow_run_id = CASE WHEN :last_occurrence IS NULL THEN last_workflow_run_id
        ELSE :last_workflow_run_id END,
    claimed_by = NULL, claim_expires_at = NULL
WHERE cron_job_id = :cron_job_id AND claimed_by = :owner AND version = :expected_version
  AND next_run_at IS :expected_next_run_at
RETURNING cron_job_id;

-- name: cron_job_release_many
UPDATE cron_jobs SET claimed_by = NULL, claim_expires_at = NULL
WHERE cron_job_id IN (SELECT value FROM json_each(:cron_job_ids)) AND claimed_by = :owner;

-- name: cron_job_get_by_names
-- `cron apply`: only the jobs a file declares (:names is a JSON array), never every stored job.
SELECT * FROM cron_jobs
WHERE tenant = :tenant AND name IN (SELECT value FROM json_each(:names));

-- name: cron_job_names_by_label
-- `cron apply --prune`: the names of the apply's label (NULL: no label); the store leaves out
-- the declared ones.
SELECT name FROM cron_jobs WHERE tenant = :tenant AND label IS :label;

-- name: cron_apply_begin
INSERT INTO cron_applies (tenant, apply_key, request_hash, result, started_at)
VALUES (:tenant, :apply_key, :request_hash, NULL, :now)
ON CONFLICT (tenant, apply_key) DO NOTHING;

-- name: cron_apply_get
SELECT * FROM cron_applies WHERE tenant = :tenant AND apply_key = :apply_key;

-- name: cron_apply_take_over
-- An apply whose first try died without a result (no finish, no abandon) for :stale: a retry
-- takes it over, guarded by the start it saw.
UPDATE cron_applies SET started_at = :now
WHERE tenant = :tenant AND apply_key = :apply_key AND result IS NULL
  AND started_at = :seen_started_at;

-- name: cron_apply_finish
UPDATE cron_applies SET result = :result WHERE tenant = :tenant AND apply_key = :apply_key;

-- name: cron_apply_abandon
DELETE FROM cron_applies
WHERE tenant = :tenant AND apply_key = :apply_key AND result IS NULL;

-- name: cron_apply_forget
-- Results are kept a day: long enough for any retry.
DELETE FROM cron_applies WHERE tenant = :tenant AND started_at < :before;

-- name: cron_job_present
-- After a batch insert: which of the ids it tried are stored (a taken name skipped its job).
SELECT cron_job_id FROM cron_jobs WHERE cron_job_id IN (SELECT value FROM json_each(:cron_job_ids));

-- name: cron_occurrence_prune
-- Retention: one bounded batch of history rows recorded before :before, oldest first through the
-- primary key (record ids grow with time, so the scan stops at the first young rows). A job's
-- newest row (by occurrence, then record id) is always kept, so its history never turns empty
-- while the job exists. Inside the caller's write transaction.
DELETE FROM cron_occurrences
WHERE record_id IN (
    SELECT o.record_id FROM cron_occurrences o
    WHERE o.recorded_at < :before
      AND EXISTS (
          SELECT 1 FROM cron_occurrences n
          WHERE n.cron_job_id = o.cron_job_id
            AND (n.occurrence > o.occurrence
                 OR (n.occurrence = o.occurrence AND n.record_id > o.record_id))
      )
    ORDER BY o.record_id
    LIMIT :limit
);

-- name: cron_occurrence_count_prunable
-- What cron_occurrence_prune would delete (a dry run).
SELECT count(*) AS n FROM cron_occurrences o
WHERE o.recorded_at < :before
  AND EXISTS (
      SELECT 1 FROM cron_occurrences n
      WHERE n.cron_job_id = o.cron_job_id
        AND (n.occurrence > o.occurrence
             OR (n.occurrence = o.occurrence AND n.record_id > o.record_id))
  );

-- name: cron_audit_prune
-- Retention: one bounded batch of audit rows written before :before, oldest first.
DELETE FROM cron_audit
WHERE audit_id IN (
    SELECT audit_id FROM cron_audit WHERE at < :before ORDER BY audit_id LIMIT :limit
);

-- name: cron_audit_count_prunable
SELECT count(*) AS n FROM cron_audit WHERE at < :before;

-- name: cron_job_delete_many
-- `cron apply --prune`: many deletes in one statement (:doomed is a JSON array of [id, version]
-- pairs), each guarded by the version the apply read; the ids deleted come back.
DELETE FROM cron_jobs
WHERE tenant = :tenant
  AND (cron_job_id, version) IN (
      SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(:doomed)
  )
RETURNING cron_job_id;
