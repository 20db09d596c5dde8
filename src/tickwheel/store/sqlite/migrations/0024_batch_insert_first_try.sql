-- PostgreSQL's migration 0024 adds tickwheel_execution_insert: a batch inserted without ON
-- CONFLICT's arbitration first, and with it only when a key is taken. SQLite's insert has no
-- speculative insertion to save (one writer, INSERT OR IGNORE), so nothing changes here. The
-- migration exists so that both dialects keep the same numbered list.
SELECT 1;
