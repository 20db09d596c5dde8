-- name: stats_status_counts
-- One pass over the (tenant, status, execution_id) index; min(ready_at) is only read for READY.
SELECT status, count(*) AS n, min(ready_at) AS oldest_ready_at
FROM executions
WHERE tenant = :tenant
GROUP BY status;

-- name: stats_starts_per_minute
-- Times are integer microseconds: integer division floors to the minute.
SELECT (started_at / 60000000) * 60000000 AS minute, count(*) AS n
FROM executions
WHERE tenant = :tenant AND started_at >= :since
GROUP BY minute
ORDER BY minute;

-- name: stats_start_sample
SELECT started_at, execute_at
FROM executions
WHERE tenant = :tenant AND started_at >= :since
ORDER BY started_at DESC
LIMIT :limit;

-- name: stats_lease_owners
SELECT lease_owner, count(*) AS n, max(lease_expires_at) AS latest_lease_expires_at,
       min(started_at) AS oldest_started_at
FROM executions
WHERE tenant = :tenant AND status = 'RUNNING'
GROUP BY lease_owner
ORDER BY lease_owner;
