-- PostgreSQL's migration 0021 drops executions_tenant_list and turns the attempts' foreign key
-- into a delete trigger, because there every status change writes an entry into every plain
-- index of executions (no transition is a HOT update) and the key's check ran at every claim.
-- SQLite keeps both: its listing reads executions_tenant_list, and its single writer was not
-- where the drain's time went (docs/scaling.md, "What a status change writes"). The migration
-- exists so that both dialects keep the same numbered list.
SELECT 1;
