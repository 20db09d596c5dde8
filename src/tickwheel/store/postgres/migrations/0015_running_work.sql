-- Running work (issue 14): a cancel asked of a RUNNING execution, which its worker hears at its
-- next heartbeat; the handler's last progress report ({"fraction", "message", "at"}) and its
-- checkpoint (small JSON handed to the next attempt), both written with the heartbeat.
-- All three are NULL until set, so existing rows need no rewrite.

ALTER TABLE executions ADD COLUMN cancel_requested_at timestamptz;
ALTER TABLE executions ADD COLUMN progress jsonb;
ALTER TABLE executions ADD COLUMN checkpoint jsonb;
