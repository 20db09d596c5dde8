-- Time-range partitioning of executions is a PostgreSQL option (docs/scaling.md): SQLite has no
-- table partitioning, and `tickwheel db partitions ...` refuses a SQLite database before it runs
-- anything (PartitioningUnsupported). These names exist because both dialects define the same
-- queries; on SQLite each one answers what the SQLite store is: executions is one plain table.

-- name: partition_layout
SELECT 'plain' AS layout;

-- name: partition_list
-- No partitions: an empty result with the PostgreSQL columns.
SELECT NULL AS name, NULL AS bound, 0 AS rows_estimate, 0 AS bytes WHERE 0;

-- name: partition_lock_timeout
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_enable_blockers
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_enable_lock
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_references
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_unique_indexes
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_index_definitions
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_months_in_use
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_enable_prepare
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_create_default
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_create_month
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_copy_rows
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_copy_keys
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_drop_reference
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_swap
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_finish
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_counts
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_delete_children
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_lock_parent
SELECT 'partitioning is a PostgreSQL option' AS unsupported;

-- name: partition_detach_and_drop
SELECT 'partitioning is a PostgreSQL option' AS unsupported;
