-- Task runs keep their workflow's definition order (position), so every reader lists them the
-- same way on both backends, and name the tasks they wait on (depends_on, a JSON array of task
-- names) so that the orchestrator's sweep can find, in SQL, a PENDING task whose upstream tasks
-- all finished long ago: a submission lost in a crash.
ALTER TABLE workflow_task_runs ADD COLUMN position INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workflow_task_runs ADD COLUMN depends_on TEXT NOT NULL DEFAULT '[]';

-- Runs started before this migration take both from their (immutable) workflow's document.
UPDATE workflow_task_runs
SET position = coalesce(d.key, 0), depends_on = coalesce(json_extract(d.value, '$.dependsOn'), '[]')
FROM workflow_runs r
JOIN workflow_definitions w ON w.name = r.workflow_name AND w.version = r.workflow_version
JOIN json_each(w.document, '$.tasks') d
WHERE r.workflow_run_id = workflow_task_runs.workflow_run_id
  AND json_extract(d.value, '$.name') = workflow_task_runs.task_name;

-- The orchestrator's sweep for stalled runs walks PENDING task runs and RUNNING runs older than
-- its grace period, through these two; finished rows, the bulk of the tables, are never read.
CREATE INDEX workflow_task_runs_pending ON workflow_task_runs (updated_at)
    WHERE status = 'PENDING';
CREATE INDEX workflow_runs_running ON workflow_runs (updated_at) WHERE status = 'RUNNING';
