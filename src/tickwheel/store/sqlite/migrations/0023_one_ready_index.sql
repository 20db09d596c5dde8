-- PostgreSQL's migration 0023 drops executions_ready: there its plain claims walk
-- executions_ready_tenant from the one READY tenant, and every row becoming READY wrote an entry
-- into both indexes. SQLite keeps it: its claim walks executions_ready, and its single writer
-- was not where the drain's time went. The migration exists so that both dialects keep the same
-- numbered list.
SELECT 1;
