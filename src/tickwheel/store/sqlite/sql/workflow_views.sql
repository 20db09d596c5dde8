-- The dashboard's read-only views of workflows and their runs (WorkflowViewStore).

-- name: workflow_view_versions
-- The workflows the tenant resolves (its own by name, else the shared), never another tenant's.
SELECT name, count(*) AS versions, min(version) AS first_version, max(version) AS latest_version
FROM workflow_definitions w
WHERE owner IN (:tenant, '')
  AND owner = (SELECT owner FROM workflow_definitions
               WHERE name = w.name AND owner IN (:tenant, '')
               ORDER BY owner = '' LIMIT 1)
GROUP BY name
ORDER BY name;

-- name: workflow_view_runs
-- Newest first by the UUIDv7 primary key (TEXT in canonical lower-case form sorts as the
-- number does); ``before`` is the keyset cursor, the filters are NULL when unused.
SELECT * FROM workflow_runs
WHERE tenant = :tenant
  AND (:before IS NULL OR workflow_run_id < :before)
  AND (:workflow IS NULL OR workflow_name = :workflow)
  AND (:status IS NULL OR status = :status)
ORDER BY workflow_run_id DESC
LIMIT :limit;

-- name: workflow_view_task_counts
SELECT workflow_run_id, status, count(*) AS n
FROM workflow_task_runs
WHERE workflow_run_id IN (SELECT value FROM json_each(:workflow_run_ids))
GROUP BY workflow_run_id, status;

-- name: workflow_view_task_states
-- One statement for the live feed's tick: the run, its task runs, each submitted task's
-- execution by primary key (and the run's tenant, so a task never shows another tenant's row).
SELECT r.status AS run_status, r.retry_count, r.finished_at,
       t.task_name, t.status, t.execution_id, t.updated_at,
       e.status AS execution_status, e.attempt_count
FROM workflow_runs r
JOIN workflow_task_runs t ON t.workflow_run_id = r.workflow_run_id
LEFT JOIN executions e ON e.execution_id = t.execution_id AND e.tenant = r.tenant
WHERE r.workflow_run_id = :workflow_run_id AND r.tenant = :tenant;
