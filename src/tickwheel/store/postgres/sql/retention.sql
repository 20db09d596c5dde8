-- name: execution_count_by_status
-- Each non-terminal status through its own partial index (an index-only scan of those rows and
-- no others); terminal rows only from finished_since on, through executions_finished, so the
-- cost follows the live work and the window, not the history kept.
SELECT 'SCHEDULED' AS status, count(*) AS n FROM executions WHERE status = 'SCHEDULED'
UNION ALL SELECT 'READY', count(*) FROM executions WHERE status = 'READY'
UNION ALL SELECT 'RUNNING', count(*) FROM executions WHERE status = 'RUNNING'
UNION ALL SELECT 'RETRY_WAIT', count(*) FROM executions WHERE status = 'RETRY_WAIT'
UNION ALL
SELECT status, count(*) FROM executions
WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED')
  AND finished_at >= coalesce(%(finished_since)s::timestamptz, '-infinity'::timestamptz)
GROUP BY status;

-- name: execution_prune
-- One bounded batch, oldest first, through executions_finished. The batch is a CTE, evaluated
-- exactly once: as an IN (subquery) the planner may re-run the LIMIT under a nested loop and
-- delete more than the batch. SKIP LOCKED: a row a replay or another pruner holds is left for the
-- next batch; and FOR UPDATE re-checks the WHERE on the row it locks, so a row replayed meanwhile
-- (no longer terminal) is never chosen. Attempts, events and outputs go with their execution
-- (attempts by the delete trigger of migration 0021, the others by ON DELETE CASCADE).
WITH batch AS MATERIALIZED (
    SELECT execution_id FROM executions
    WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED')
      AND finished_at < %(finished_before)s::timestamptz
    ORDER BY finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
-- ANY (ARRAY(...)) and no other condition make the delete a primary-key lookup of just the
-- batch's ids, whatever the planner thinks of the table. No status re-check is needed here: the
-- batch's rows are locked, and were terminal when locked, until this statement commits.
DELETE FROM executions
WHERE execution_id = ANY (ARRAY(SELECT execution_id FROM batch));
