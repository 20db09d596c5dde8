-- name: execution_count_by_status
-- The same shape as PostgreSQL's: non-terminal statuses through their partial indexes, terminal
-- ones from finished_since on (NULL: all) through executions_finished.
SELECT 'SCHEDULED' AS status, count(*) AS n FROM executions WHERE status = 'SCHEDULED'
UNION ALL SELECT 'READY', count(*) FROM executions WHERE status = 'READY'
UNION ALL SELECT 'RUNNING', count(*) FROM executions WHERE status = 'RUNNING'
UNION ALL SELECT 'RETRY_WAIT', count(*) FROM executions WHERE status = 'RETRY_WAIT'
UNION ALL
SELECT status, count(*) FROM executions
WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED')
  AND finished_at >= coalesce(:finished_since, -9223372036854775808)
GROUP BY status;

-- name: execution_prune
-- One bounded batch, oldest first, inside the caller's write transaction (nothing can replay a
-- row between the choice and the delete). Attempts, events and outputs go with their execution
-- (ON DELETE CASCADE; the store turns foreign keys on).
DELETE FROM executions
WHERE execution_id IN (
    SELECT execution_id FROM executions
    WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED')
      AND finished_at < :finished_before
    ORDER BY finished_at
    LIMIT :limit
);
