-- `cron apply` at scale (issue 18). A job remembers the label of the file (or owner) that
-- applied it, so that several files coexist and `--prune` deletes only its own label's jobs
-- (NULL: applied without a label, or made through the API). An apply that carries an
-- idempotency key records its result, so that a retried apply returns the first one's result
-- instead of applying again; `result` is NULL while the first is still running.

ALTER TABLE cron_jobs ADD COLUMN label TEXT;
CREATE INDEX cron_jobs_label ON cron_jobs (tenant, label, name);

CREATE TABLE cron_applies (
    tenant        TEXT    NOT NULL,
    apply_key     TEXT    NOT NULL,
    request_hash  TEXT    NOT NULL,
    result        TEXT,
    started_at    INTEGER NOT NULL,
    PRIMARY KEY (tenant, apply_key)
);
