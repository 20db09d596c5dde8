-- PostgreSQL's migration 0025 leaves room on every page of shard_leases for its rows' next
-- versions (fillfactor), so that a lease renewal is an update in place. SQLite rewrites a row
-- in its page whatever it holds, so nothing changes here. The migration exists so that both
-- dialects keep the same numbered list.
SELECT 1;
