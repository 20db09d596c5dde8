-- The worker registry: each worker upserts its row every few seconds (not per claim) and marks
-- it stopped at shutdown. Not tenant-scoped: a worker serves every tenant. The dashboard and
-- /metrics read the recently heard-from workers through the heartbeat index.
CREATE TABLE workers (
    worker_id          TEXT PRIMARY KEY NOT NULL,
    host               TEXT NOT NULL,
    pid                INTEGER NOT NULL,
    concurrency        INTEGER NOT NULL,
    started_at         INTEGER NOT NULL,
    last_heartbeat_at  INTEGER NOT NULL,
    running            INTEGER NOT NULL,
    stopped_at         INTEGER
);
CREATE INDEX workers_last_heartbeat ON workers (last_heartbeat_at);
