-- name: execution_output_put
-- A replayed execution that succeeds again replaces its earlier output.
INSERT INTO execution_outputs (execution_id, output, size_bytes, created_at)
VALUES (:execution_id, :output, :size_bytes, :now)
ON CONFLICT (execution_id) DO UPDATE
SET output = excluded.output, size_bytes = excluded.size_bytes, created_at = excluded.created_at;

-- name: execution_output_get
SELECT o.output FROM execution_outputs o JOIN executions e ON e.execution_id = o.execution_id
WHERE e.tenant = :tenant AND o.execution_id = :execution_id;
