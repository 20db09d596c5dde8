-- Tracing (issue 16): the submitter's W3C trace context ({"traceparent", "tracestate"}), stored
-- with the execution so that its attempts continue the submitter's trace (docs/tracing.md).
-- NULL when the submitter traced nothing (or tracing is not installed): no rewrite of old rows.

ALTER TABLE executions ADD COLUMN trace_context jsonb;
