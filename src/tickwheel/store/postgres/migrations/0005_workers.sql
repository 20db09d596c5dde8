-- The worker registry: each worker upserts its row every few seconds (not per claim) and marks
-- it stopped at shutdown. Not tenant-scoped: a worker serves every tenant. The dashboard and
-- /metrics read the recently heard-from workers through the heartbeat index.
CREATE TABLE workers (
    worker_id          text PRIMARY KEY,
    host               text NOT NULL,
    pid                integer NOT NULL,
    concurrency        integer NOT NULL,
    started_at         timestamptz NOT NULL,
    last_heartbeat_at  timestamptz NOT NULL,
    running            integer NOT NULL,
    stopped_at         timestamptz
);
CREATE INDEX workers_last_heartbeat ON workers (last_heartbeat_at);
