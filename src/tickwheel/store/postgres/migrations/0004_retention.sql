-- Retention: the pruner deletes terminal executions oldest-finished first, and /metrics counts
-- the recently finished ones; both walk this index, which holds terminal rows only.
-- On a large existing table, create it first without blocking writes, and this is a no-op:
--   CREATE INDEX CONCURRENTLY executions_finished ON executions (finished_at)
--       WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED');
CREATE INDEX IF NOT EXISTS executions_finished ON executions (finished_at)
    WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED');
