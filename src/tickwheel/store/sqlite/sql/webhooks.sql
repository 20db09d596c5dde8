-- Failure notifications: subscriptions, the outbox rows written beside each event, and the
-- sender's claim and record of each delivery (docs/webhooks.md). A delivery id is a version-4
-- UUID made from randomblob; instants in payloads are ISO 8601 in UTC, as on PostgreSQL.

-- name: webhook_insert
INSERT INTO webhook_subscriptions (webhook_id, tenant, url, events, secret, description, created_at)
VALUES (:webhook_id, :tenant, :url, :events, :secret, :description, :created_at);

-- name: webhook_list
SELECT * FROM webhook_subscriptions WHERE tenant = :tenant ORDER BY created_at, webhook_id;

-- name: webhook_get
SELECT * FROM webhook_subscriptions WHERE tenant = :tenant AND webhook_id = :webhook_id;

-- name: webhook_delete
DELETE FROM webhook_subscriptions WHERE tenant = :tenant AND webhook_id = :webhook_id;

-- name: webhook_delivery_list
-- Newest first; the tenant guard keeps another tenant's subscription id from reading anything.
SELECT * FROM webhook_deliveries
WHERE tenant = :tenant AND webhook_id = :webhook_id
ORDER BY created_at DESC, delivery_id
LIMIT :limit;

-- name: webhook_delivery_claim
-- Due PENDING rows through webhook_deliveries_due (the write lock serialises senders). The
-- lease is next_attempt_at pushed past the send: a sender that dies leaves the row due again.
UPDATE webhook_deliveries
SET attempts = attempts + 1, lease_owner = :owner, lease_expires_at = :lease_expires_at,
    next_attempt_at = :lease_expires_at
WHERE delivery_id IN (
    SELECT delivery_id FROM webhook_deliveries
    WHERE status = 'PENDING' AND next_attempt_at <= :now
    ORDER BY next_attempt_at
    LIMIT :limit
)
RETURNING delivery_id;

-- name: webhook_delivery_claimed
-- The rows just claimed with their subscription's url and secret (RETURNING cannot join).
SELECT d.*, s.url, s.secret
FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.webhook_id = d.webhook_id
WHERE d.delivery_id IN (SELECT value FROM json_each(:delivery_ids))
ORDER BY d.created_at;

-- name: webhook_delivery_finish
-- Guarded by the claim (owner and attempt): a sender whose lease ran out and was overtaken
-- records nothing.
UPDATE webhook_deliveries
SET status = :status, response_code = :response_code, last_error = :last_error,
    next_attempt_at = :next_attempt_at, lease_owner = NULL, lease_expires_at = NULL,
    finished_at = CASE WHEN :status = 'PENDING' THEN NULL ELSE :now END
WHERE delivery_id = :delivery_id AND status = 'PENDING' AND lease_owner = :owner
  AND attempts = :attempts;

-- name: webhook_delivery_prune
-- Retention: one bounded batch of finished deliveries, through webhook_deliveries_finished.
DELETE FROM webhook_deliveries
WHERE delivery_id IN (
    SELECT delivery_id FROM webhook_deliveries
    WHERE status <> 'PENDING' AND finished_at < :before
    ORDER BY finished_at
    LIMIT :limit
);

-- name: webhook_outbox_execution_failed
-- In the transaction that dead-lettered the executions: one row per subscription of their
-- tenants that listens to execution.failed (none, and nothing is written, without one).
INSERT INTO webhook_deliveries (delivery_id, webhook_id, tenant, event, payload, status,
                                next_attempt_at, created_at)
SELECT lower(printf('%s-%s-4%s-%s%s-%s', hex(randomblob(4)), hex(randomblob(2)),
                 substr(hex(randomblob(2)), 2), substr('89ab', 1 + abs(random()) % 4, 1),
                 substr(hex(randomblob(2)), 2), hex(randomblob(6)))),
    s.webhook_id, e.tenant, 'execution.failed',
    json_object(
        'executionId', e.execution_id, 'definitionUri', e.definition_uri,
        'idempotencyKey', e.idempotency_key, 'attemptCount', e.attempt_count,
        'error', json(e.error),
        'failedAt', strftime('%Y-%m-%dT%H:%M:%S', coalesce(e.finished_at, :now) / 1000000, 'unixepoch') || printf('.%06dZ', coalesce(e.finished_at, :now) % 1000000)),
    'PENDING', :now, :now
FROM executions e
JOIN webhook_subscriptions s ON s.tenant = e.tenant
  AND EXISTS (SELECT 1 FROM json_each(s.events) WHERE value = 'execution.failed')
WHERE e.execution_id IN (SELECT value FROM json_each(:execution_ids)) AND e.status = 'FAILED';

-- name: webhook_outbox_cron
-- One occurrence (run once per record, in the transaction that recorded it; the caller keeps
-- SKIPPED_MISFIRE and FAILED only): cron.missed or cron.failed per subscription that listens.
INSERT INTO webhook_deliveries (delivery_id, webhook_id, tenant, event, payload, status,
                                next_attempt_at, created_at)
SELECT lower(printf('%s-%s-4%s-%s%s-%s', hex(randomblob(4)), hex(randomblob(2)),
                 substr(hex(randomblob(2)), 2), substr('89ab', 1 + abs(random()) % 4, 1),
                 substr(hex(randomblob(2)), 2), hex(randomblob(6)))),
    s.webhook_id, c.tenant, :event,
    json_object(
        'cronJobId', c.cron_job_id, 'cronJobName', c.name, 'outcome', :outcome,
        'reason', :reason, 'occurrence', strftime('%Y-%m-%dT%H:%M:%S', :occurrence / 1000000, 'unixepoch') || printf('.%06dZ', :occurrence % 1000000)),
    'PENDING', :now, :now
FROM cron_jobs c
JOIN webhook_subscriptions s ON s.tenant = c.tenant
  AND EXISTS (SELECT 1 FROM json_each(s.events) WHERE value = :event)
WHERE c.cron_job_id = :cron_job_id;

-- name: webhook_outbox_workflow_run_failed
INSERT INTO webhook_deliveries (delivery_id, webhook_id, tenant, event, payload, status,
                                next_attempt_at, created_at)
SELECT lower(printf('%s-%s-4%s-%s%s-%s', hex(randomblob(4)), hex(randomblob(2)),
                 substr(hex(randomblob(2)), 2), substr('89ab', 1 + abs(random()) % 4, 1),
                 substr(hex(randomblob(2)), 2), hex(randomblob(6)))),
    s.webhook_id, r.tenant, 'workflow_run.failed',
    json_object(
        'workflowRunId', r.workflow_run_id, 'workflowName', r.workflow_name,
        'workflowVersion', r.workflow_version, 'retryCount', r.retry_count,
        'failedAt', strftime('%Y-%m-%dT%H:%M:%S', coalesce(r.finished_at, :now) / 1000000, 'unixepoch') || printf('.%06dZ', coalesce(r.finished_at, :now) % 1000000)),
    'PENDING', :now, :now
FROM workflow_runs r
JOIN webhook_subscriptions s ON s.tenant = r.tenant
  AND EXISTS (SELECT 1 FROM json_each(s.events) WHERE value = 'workflow_run.failed')
WHERE r.workflow_run_id = :workflow_run_id AND r.status = 'FAILED';
