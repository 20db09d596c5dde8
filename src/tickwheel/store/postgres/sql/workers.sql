-- name: worker_heartbeat
-- One upsert per report (every few seconds per worker, never per claim). started_at is kept
-- from the first report; a report after a stop (same id) revives the row.
INSERT INTO workers (worker_id, host, pid, concurrency, started_at, last_heartbeat_at, running)
VALUES (%(worker_id)s, %(host)s, %(pid)s, %(concurrency)s,
        coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now()), %(running)s)
ON CONFLICT (worker_id) DO UPDATE
SET host = excluded.host, pid = excluded.pid, concurrency = excluded.concurrency,
    last_heartbeat_at = excluded.last_heartbeat_at, running = excluded.running,
    stopped_at = NULL;

-- name: worker_stopped
UPDATE workers
SET stopped_at = coalesce(%(now)s::timestamptz, now()), running = 0
WHERE worker_id = %(worker_id)s;

-- name: worker_list
-- Through workers_last_heartbeat: only the workers heard from since alive_since.
SELECT * FROM workers
WHERE last_heartbeat_at >= %(alive_since)s
ORDER BY worker_id;

-- name: worker_count_alive
SELECT count(*) AS n FROM workers
WHERE last_heartbeat_at >= %(alive_since)s AND stopped_at IS NULL;

-- name: concurrency_counts
-- READY executions under a concurrency limit (through executions_concurrency_queue: only the
-- unfinished executions with a limit) and the slots held now.
SELECT
    (SELECT count(*) FROM executions
     WHERE concurrency_limit IS NOT NULL
       AND status IN ('SCHEDULED', 'READY', 'RUNNING', 'RETRY_WAIT')
       AND status = 'READY') AS waiting,
    (SELECT count(*) FROM concurrency_holds) AS held;

-- name: execution_oldest_ready
-- The backlog's age over all tenants: the READY rows through the executions_ready_tenant partial
-- index (the planner reads ready_at from it; it never touches other statuses).
SELECT min(ready_at) AS oldest FROM executions WHERE status = 'READY';
