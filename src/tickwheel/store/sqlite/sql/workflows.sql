-- Workflow definitions belong to an owner (a tenant, or '' for the shared registry) and resolve
-- like Job Definitions: the tenant's own when it owns any version of the name, else the shared.

-- name: workflow_definition_insert
-- A tenant may not take a shared name it does not own already (its resolution would flip).
INSERT INTO workflow_definitions (owner, name, version, document, content_hash, created_at)
SELECT :owner, :name, :version, :document, :content_hash, :created_at
WHERE :owner = ''
   OR EXISTS (SELECT 1 FROM workflow_definitions WHERE owner = :owner AND name = :name)
   OR NOT EXISTS (SELECT 1 FROM workflow_definitions WHERE owner = '' AND name = :name)
ON CONFLICT (owner, name, version) DO NOTHING;

-- name: workflow_definition_get
SELECT * FROM workflow_definitions
WHERE name = :name
  AND owner = (SELECT owner FROM workflow_definitions
               WHERE name = :name AND owner IN (:tenant, '')
               ORDER BY owner = '' LIMIT 1)
  AND (:version IS NULL OR version = :version)
ORDER BY version DESC LIMIT 1;

-- name: workflow_definition_list
SELECT owner, name, version, document, content_hash, created_at
FROM (
    SELECT w.*, row_number() OVER (PARTITION BY name ORDER BY owner = '', version DESC) AS rn
    FROM workflow_definitions w
    WHERE owner IN (:tenant, '')
)
WHERE rn = 1
ORDER BY name;

-- name: workflow_run_insert
INSERT INTO workflow_runs (workflow_run_id, tenant, workflow_name, workflow_version, inputs,
    status, idempotency_key, request_hash, retry_count, created_at, updated_at)
VALUES (:workflow_run_id, :tenant, :workflow_name, :workflow_version, :inputs, :status,
    :idempotency_key, :request_hash, :retry_count, :created_at, :updated_at)
ON CONFLICT DO NOTHING;

-- name: workflow_run_get
SELECT * FROM workflow_runs
WHERE workflow_run_id = :workflow_run_id AND (:tenant IS NULL OR tenant = :tenant);

-- name: workflow_run_get_by_key
SELECT * FROM workflow_runs WHERE tenant = :tenant AND idempotency_key = :idempotency_key;

-- name: workflow_run_finish
-- Guarded by the attempt (retry_count) the caller evaluated: a run retried since stays RUNNING.
UPDATE workflow_runs SET status = :status, updated_at = :now, finished_at = :now
WHERE workflow_run_id = :workflow_run_id AND status = 'RUNNING'
  AND retry_count = :retry_count;

-- name: workflow_run_retry
-- Guarded by the attempt the caller read: two requests retrying the same failure retry it once.
UPDATE workflow_runs
SET status = 'RUNNING', retry_count = retry_count + 1, updated_at = :now, finished_at = NULL
WHERE workflow_run_id = :workflow_run_id AND tenant = :tenant
  AND status IN ('FAILED', 'CANCELLED') AND retry_count = :retry_count;

-- name: workflow_task_run_insert
INSERT INTO workflow_task_runs (workflow_run_id, task_name, status, updated_at, position,
    depends_on)
VALUES (:workflow_run_id, :task_name, 'PENDING', :now, :position, :depends_on);

-- name: workflow_task_run_list
-- In the workflow's definition order (task_name only breaks ties of rows older than 0008).
SELECT * FROM workflow_task_runs WHERE workflow_run_id = :workflow_run_id
ORDER BY position, task_name;

-- name: workflow_run_trace_context
-- The trace context stored with the run's earliest traced task execution (docs/tracing.md):
-- the orchestrator submits the run's later tasks in that trace. A few rows by primary keys.
SELECT e.trace_context FROM workflow_task_runs t
JOIN executions e ON e.execution_id = t.execution_id
WHERE t.workflow_run_id = :workflow_run_id AND e.trace_context IS NOT NULL
ORDER BY e.created_at, e.execution_id
LIMIT 1;

-- name: workflow_task_runs_reset
-- In the retry's write transaction: chosen by status here, not from an earlier read, so a task
-- that ended (FAILED) just before the retry is reset too (statuses: a JSON array).
UPDATE workflow_task_runs
SET status = 'PENDING', execution_id = NULL, output = NULL, error = NULL, updated_at = :now
WHERE workflow_run_id = :workflow_run_id AND status IN (SELECT value FROM json_each(:statuses));

-- name: workflow_task_run_update
-- Guarded by the statuses the caller expects (passed as a JSON array) and by the run's
-- retry_count the caller read: a write decided for an attempt that was retried since changes
-- nothing (the retry resets its task runs in the same transaction as the increment).
UPDATE workflow_task_runs
SET status = :status, execution_id = coalesce(:execution_id, execution_id), output = :output,
    error = :error, updated_at = :now
WHERE workflow_run_id = :workflow_run_id AND task_name = :task_name
  AND status IN (SELECT value FROM json_each(:expected))
  AND EXISTS (
      SELECT 1 FROM workflow_runs r
      WHERE r.workflow_run_id = :workflow_run_id AND r.retry_count = :retry_count);

-- name: workflow_event_insert
INSERT INTO workflow_events (execution_id, workflow_run_id, status, created_at)
VALUES (:execution_id, :workflow_run_id, :status, :now);

-- name: workflow_event_claim
-- Runs inside BEGIN IMMEDIATE: the select-then-update is one step even against another process.
UPDATE workflow_events SET claimed_by = :owner, claim_expires_at = :now + :lease_us
WHERE event_id IN (
    SELECT event_id FROM workflow_events
    WHERE claim_expires_at IS NULL OR claim_expires_at <= :now
    ORDER BY event_id LIMIT :limit
)
RETURNING *;

-- name: workflow_event_delete
DELETE FROM workflow_events
WHERE claimed_by = :owner AND event_id IN (SELECT value FROM json_each(:event_ids));

-- name: workflow_run_list_stalled
-- RUNNING runs that nobody is advancing: a PENDING task whose upstream tasks all finished (or a
-- root), none of them changed within the grace period, so its submission (or its skip) was
-- lost in a crash; or every task finished that long ago and the run was never ended. Keyset
-- paged by run id; the first branch walks workflow_task_runs_pending, the second
-- workflow_runs_running, never finished rows.
SELECT workflow_run_id FROM (
    SELECT t.workflow_run_id
    FROM workflow_task_runs t
    JOIN workflow_runs r ON r.workflow_run_id = t.workflow_run_id
    WHERE t.status = 'PENDING' AND t.updated_at <= :cutoff AND r.status = 'RUNNING'
      AND NOT EXISTS (
          SELECT 1 FROM workflow_task_runs u
          WHERE u.workflow_run_id = t.workflow_run_id
            AND u.task_name IN (SELECT value FROM json_each(t.depends_on))
            AND (u.status IN ('PENDING', 'SUBMITTED') OR u.updated_at > :cutoff))
    UNION
    SELECT r.workflow_run_id
    FROM workflow_runs r
    WHERE r.status = 'RUNNING' AND r.updated_at <= :cutoff
      AND NOT EXISTS (
          SELECT 1 FROM workflow_task_runs u
          WHERE u.workflow_run_id = r.workflow_run_id
            AND (u.status IN ('PENDING', 'SUBMITTED') OR u.updated_at > :cutoff))
)
WHERE :after IS NULL OR workflow_run_id > :after
ORDER BY workflow_run_id
LIMIT :limit;
