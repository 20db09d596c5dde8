-- A cron job may start a Workflow Run per occurrence instead of an Execution of a Job
-- Definition: exactly one of definition_uri and workflow_name is set. The history row of such an
-- occurrence names its run; the job remembers its last run for the overlap policy.

ALTER TABLE cron_jobs ALTER COLUMN definition_uri DROP NOT NULL;
ALTER TABLE cron_jobs ADD COLUMN workflow_name text;
-- NULL: the latest version of the workflow, resolved again at every occurrence.
ALTER TABLE cron_jobs ADD COLUMN workflow_version integer;
ALTER TABLE cron_jobs ADD COLUMN last_workflow_run_id uuid;
ALTER TABLE cron_jobs ADD CONSTRAINT cron_jobs_one_target
    CHECK ((definition_uri IS NULL) <> (workflow_name IS NULL));

ALTER TABLE cron_occurrences ADD COLUMN workflow_run_id uuid;
