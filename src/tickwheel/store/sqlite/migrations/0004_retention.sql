-- Retention: the pruner deletes terminal executions oldest-finished first, and /metrics counts
-- the recently finished ones; both walk this index, which holds terminal rows only.
CREATE INDEX executions_finished ON executions (finished_at)
    WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED');
