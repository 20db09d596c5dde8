-- Workflow definitions belong to an owner (a tenant, or '' for the shared registry) and resolve
-- like Job Definitions: the tenant's own when it owns any version of the name, else the shared.

-- name: workflow_definition_insert
-- A tenant may not take a shared name it does not own already (its resolution would flip).
INSERT INTO workflow_definitions (owner, name, version, document, content_hash, created_at)
SELECT %(owner)s::text, %(name)s, %(version)s, %(document)s, %(content_hash)s, %(created_at)s
WHERE %(owner)s::text = ''
   OR EXISTS (SELECT 1 FROM workflow_definitions WHERE owner = %(owner)s::text AND name = %(name)s)
   OR NOT EXISTS (SELECT 1 FROM workflow_definitions WHERE owner = '' AND name = %(name)s)
ON CONFLICT (owner, name, version) DO NOTHING;

-- name: workflow_definition_get
SELECT * FROM workflow_definitions
WHERE name = %(name)s
  AND owner = (SELECT owner FROM workflow_definitions
               WHERE name = %(name)s AND owner IN (%(tenant)s::text, '')
               ORDER BY owner = '' LIMIT 1)
  AND (%(version)s::integer IS NULL OR version = %(version)s::integer)
ORDER BY version DESC LIMIT 1;

-- name: workflow_definition_list
SELECT DISTINCT ON (name) * FROM workflow_definitions
WHERE owner IN (%(tenant)s::text, '')
ORDER BY name, owner = '', version DESC;

-- name: workflow_run_insert
INSERT INTO workflow_runs (workflow_run_id, tenant, workflow_name, workflow_version, inputs,
    status, idempotency_key, request_hash, retry_count, created_at, updated_at)
VALUES (%(workflow_run_id)s, %(tenant)s, %(workflow_name)s, %(workflow_version)s, %(inputs)s,
    %(status)s, %(idempotency_key)s, %(request_hash)s, %(retry_count)s, %(created_at)s,
    %(updated_at)s)
ON CONFLICT DO NOTHING;

-- name: workflow_run_get
SELECT * FROM workflow_runs
WHERE workflow_run_id = %(workflow_run_id)s
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text);

-- name: workflow_run_get_by_key
SELECT * FROM workflow_runs
WHERE tenant = %(tenant)s AND idempotency_key = %(idempotency_key)s;

-- name: workflow_run_finish
-- Guarded by the attempt (retry_count) the caller evaluated: a run retried since stays RUNNING.
UPDATE workflow_runs SET status = %(status)s, updated_at = %(now)s, finished_at = %(now)s
WHERE workflow_run_id = %(workflow_run_id)s AND status = 'RUNNING'
  AND retry_count = %(retry_count)s;

-- name: workflow_run_retry
-- Guarded by the attempt the caller read: two requests retrying the same failure retry it once.
UPDATE workflow_runs
SET status = 'RUNNING', retry_count = retry_count + 1, updated_at = %(now)s, finished_at = NULL
WHERE workflow_run_id = %(workflow_run_id)s AND tenant = %(tenant)s
  AND status IN ('FAILED', 'CANCELLED') AND retry_count = %(retry_count)s;

-- name: workflow_task_run_insert
INSERT INTO workflow_task_runs (workflow_run_id, task_name, status, updated_at, position,
    depends_on)
VALUES (%(workflow_run_id)s, %(task_name)s, 'PENDING', %(now)s, %(position)s, %(depends_on)s);

-- name: workflow_task_run_list
-- In the workflow's definition order (task_name only breaks ties of rows older than 0008).
SELECT * FROM workflow_task_runs WHERE workflow_run_id = %(workflow_run_id)s
ORDER BY position, task_name;

-- name: workflow_run_trace_context
-- The trace context stored with the run's earliest traced task execution (docs/tracing.md):
-- the orchestrator submits the run's later tasks in that trace. A few rows by primary keys.
SELECT e.trace_context FROM workflow_task_runs t
JOIN executions e ON e.execution_id = t.execution_id
WHERE t.workflow_run_id = %(workflow_run_id)s AND e.trace_context IS NOT NULL
ORDER BY e.created_at, e.execution_id
LIMIT 1;

-- name: workflow_task_runs_reset
-- In the retry's transaction, after workflow_run_retry locked the run row: chosen by status here,
-- not from an earlier read, so a task that ended (FAILED) just before the retry is reset too.
-- A task-run write that comes later waits for the run row and is refused by its retry_count.
UPDATE workflow_task_runs
SET status = 'PENDING', execution_id = NULL, output = NULL, error = NULL, updated_at = %(now)s
WHERE workflow_run_id = %(workflow_run_id)s AND status = ANY(%(statuses)s::text[]);

-- name: workflow_task_run_update
-- Guarded by the statuses the caller expects and by the run's retry_count the caller read: a
-- write decided for an attempt that was retried since changes nothing. The run row is locked
-- FOR SHARE (before the task row: the order workflow_run_retry locks in), so the write is
-- ordered wholly before or after a concurrent retry, as on SQLite: a plain EXISTS reads the
-- old count from the statement's snapshot and would land, during the retry's commit, on a task
-- row the retry keeps (a SUBMITTED one). Locked, it waits and re-checks the new count.
WITH run AS (
    SELECT 1 FROM workflow_runs
    WHERE workflow_run_id = %(workflow_run_id)s AND retry_count = %(retry_count)s
    FOR SHARE
)
UPDATE workflow_task_runs
SET status = %(status)s, execution_id = coalesce(%(execution_id)s::uuid, execution_id),
    output = %(output)s, error = %(error)s, updated_at = %(now)s
WHERE workflow_run_id = %(workflow_run_id)s AND task_name = %(task_name)s
  AND status = ANY(%(expected)s::text[])
  AND EXISTS (SELECT 1 FROM run);

-- name: workflow_event_insert
-- Written in the transaction that finishes the execution; the NOTIFY that wakes orchestrators
-- is sent in the same transaction, so it is delivered at commit together with the row.
INSERT INTO workflow_events (execution_id, workflow_run_id, status, created_at)
VALUES (%(execution_id)s, %(workflow_run_id)s, %(status)s, coalesce(%(now)s::timestamptz, now()));

-- name: workflow_event_claim
-- Several orchestrators claim at once: SKIP LOCKED gives each rows the others are not taking;
-- the lease hands a killed orchestrator's rows to another. The database's clock decides unless
-- the caller passes `now`.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
picked AS (
    SELECT e.event_id FROM workflow_events e, clock
    WHERE e.claim_expires_at IS NULL OR e.claim_expires_at <= clock.now
    ORDER BY e.event_id
    LIMIT %(limit)s
    FOR UPDATE OF e SKIP LOCKED
)
UPDATE workflow_events w
SET claimed_by = %(owner)s, claim_expires_at = clock.now + %(lease)s::interval
FROM picked, clock
WHERE w.event_id = picked.event_id
RETURNING w.*;

-- name: workflow_event_delete
DELETE FROM workflow_events
WHERE claimed_by = %(owner)s AND event_id = ANY(%(event_ids)s::bigint[]);

-- name: workflow_run_list_stalled
-- RUNNING runs that nobody is advancing: a PENDING task whose upstream tasks all finished (or a
-- root), none of them changed within the grace period, so its submission (or its skip) was
-- lost in a crash; or every task finished that long ago and the run was never ended. Keyset
-- paged by run id; the first branch walks workflow_task_runs_pending, the second
-- workflow_runs_running, never finished rows.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, now()) - %(grace)s::interval AS cutoff),
stalled AS (
    SELECT t.workflow_run_id
    FROM workflow_task_runs t
    JOIN workflow_runs r ON r.workflow_run_id = t.workflow_run_id
    CROSS JOIN clock
    WHERE t.status = 'PENDING' AND t.updated_at <= clock.cutoff AND r.status = 'RUNNING'
      AND NOT EXISTS (
          SELECT 1 FROM workflow_task_runs u
          WHERE u.workflow_run_id = t.workflow_run_id AND t.depends_on ? u.task_name
            AND (u.status IN ('PENDING', 'SUBMITTED') OR u.updated_at > clock.cutoff))
    UNION
    SELECT r.workflow_run_id
    FROM workflow_runs r CROSS JOIN clock
    WHERE r.status = 'RUNNING' AND r.updated_at <= clock.cutoff
      AND NOT EXISTS (
          SELECT 1 FROM workflow_task_runs u
          WHERE u.workflow_run_id = r.workflow_run_id
            AND (u.status IN ('PENDING', 'SUBMITTED') OR u.updated_at > clock.cutoff))
)
SELECT workflow_run_id FROM stalled
WHERE %(after)s::uuid IS NULL OR workflow_run_id > %(after)s::uuid
ORDER BY workflow_run_id
LIMIT %(limit)s;
