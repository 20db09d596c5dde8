-- Failure notifications: subscriptions, the outbox rows written beside each event, and the
-- sender's claim and record of each delivery (docs/webhooks.md).

-- name: webhook_insert
INSERT INTO webhook_subscriptions (webhook_id, tenant, url, events, secret, description, created_at)
VALUES (%(webhook_id)s, %(tenant)s, %(url)s, %(events)s::text[], %(secret)s, %(description)s,
        %(created_at)s);

-- name: webhook_list
SELECT * FROM webhook_subscriptions WHERE tenant = %(tenant)s ORDER BY created_at, webhook_id;

-- name: webhook_get
SELECT * FROM webhook_subscriptions
WHERE tenant = %(tenant)s AND webhook_id = %(webhook_id)s;

-- name: webhook_delete
DELETE FROM webhook_subscriptions WHERE tenant = %(tenant)s AND webhook_id = %(webhook_id)s;

-- name: webhook_delivery_list
-- Newest first; the tenant guard keeps another tenant's subscription id from reading anything.
SELECT * FROM webhook_deliveries
WHERE tenant = %(tenant)s AND webhook_id = %(webhook_id)s
ORDER BY created_at DESC, delivery_id
LIMIT %(limit)s;

-- name: webhook_delivery_claim
-- Due PENDING rows through webhook_deliveries_due, SKIP LOCKED so that several senders take
-- disjoint rows. The lease is next_attempt_at pushed past the send: a sender that dies leaves
-- the row due again when its lease ends (at least once). attempts counts the tries begun.
WITH due AS (
    SELECT delivery_id FROM webhook_deliveries
    WHERE status = 'PENDING' AND next_attempt_at <= coalesce(%(now)s::timestamptz, now())
    ORDER BY next_attempt_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE webhook_deliveries d
    SET attempts = d.attempts + 1, lease_owner = %(owner)s,
        lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval,
        next_attempt_at = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval
    FROM due
    WHERE d.delivery_id = due.delivery_id
    RETURNING d.*
)
SELECT c.*, s.url, s.secret
FROM claimed c JOIN webhook_subscriptions s ON s.webhook_id = c.webhook_id
ORDER BY c.created_at;

-- name: webhook_delivery_finish
-- Guarded by the claim (owner and attempt): a sender whose lease ran out and was overtaken
-- records nothing.
UPDATE webhook_deliveries
SET status = %(status)s, response_code = %(response_code)s, last_error = %(last_error)s,
    next_attempt_at = %(next_attempt_at)s, lease_owner = NULL, lease_expires_at = NULL,
    finished_at = CASE WHEN %(status)s = 'PENDING' THEN NULL
        ELSE coalesce(%(now)s::timestamptz, now()) END
WHERE delivery_id = %(delivery_id)s AND status = 'PENDING' AND lease_owner = %(owner)s
  AND attempts = %(attempts)s;

-- name: webhook_delivery_prune
-- Retention: one bounded batch of finished deliveries, through webhook_deliveries_finished.
DELETE FROM webhook_deliveries
WHERE delivery_id IN (
    SELECT delivery_id FROM webhook_deliveries
    WHERE status <> 'PENDING' AND finished_at < %(before)s
    ORDER BY finished_at
    LIMIT %(limit)s
);

-- name: webhook_outbox_execution_failed
-- In the transaction that dead-lettered the executions: one row per subscription of their
-- tenants that listens to execution.failed (none, and nothing is written, without one).
INSERT INTO webhook_deliveries (delivery_id, webhook_id, tenant, event, payload, status,
                                next_attempt_at, created_at)
SELECT gen_random_uuid(), s.webhook_id, e.tenant, 'execution.failed',
    jsonb_build_object(
        'executionId', e.execution_id, 'definitionUri', e.definition_uri,
        'idempotencyKey', e.idempotency_key, 'attemptCount', e.attempt_count, 'error', e.error,
        'failedAt', to_char(coalesce(e.finished_at, now()) AT TIME ZONE 'UTC',
                            'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')),
    'PENDING', coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now())
FROM executions e
JOIN webhook_subscriptions s ON s.tenant = e.tenant AND 'execution.failed' = ANY (s.events)
WHERE e.execution_id = ANY (%(execution_ids)s::uuid[]) AND e.status = 'FAILED';

-- name: webhook_outbox_cron
-- In the transaction that recorded the occurrences (already filtered to SKIPPED_MISFIRE and
-- FAILED by the caller): cron.missed or cron.failed per subscription that listens, due when
-- the occurrence was recorded.
INSERT INTO webhook_deliveries (delivery_id, webhook_id, tenant, event, payload, status,
                                next_attempt_at, created_at)
SELECT gen_random_uuid(), s.webhook_id, c.tenant, o.event,
    jsonb_build_object(
        'cronJobId', c.cron_job_id, 'cronJobName', c.name, 'outcome', o.outcome,
        'reason', o.reason,
        'occurrence', to_char(o.occurrence AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')),
    'PENDING', o.recorded_at, o.recorded_at
FROM unnest(%(cron_job_id)s::uuid[], %(occurrence)s::timestamptz[], %(outcome)s::text[],
            %(reason)s::text[], %(event)s::text[], %(recorded_at)s::timestamptz[])
     AS o (cron_job_id, occurrence, outcome, reason, event, recorded_at)
JOIN cron_jobs c ON c.cron_job_id = o.cron_job_id
JOIN webhook_subscriptions s ON s.tenant = c.tenant AND o.event = ANY (s.events);

-- name: webhook_outbox_workflow_run_failed
INSERT INTO webhook_deliveries (delivery_id, webhook_id, tenant, event, payload, status,
                                next_attempt_at, created_at)
SELECT gen_random_uuid(), s.webhook_id, r.tenant, 'workflow_run.failed',
    jsonb_build_object(
        'workflowRunId', r.workflow_run_id, 'workflowName', r.workflow_name,
        'workflowVersion', r.workflow_version, 'retryCount', r.retry_count,
        'failedAt', to_char(coalesce(r.finished_at, now()) AT TIME ZONE 'UTC',
                            'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')),
    'PENDING', %(now)s::timestamptz, %(now)s::timestamptz
FROM workflow_runs r
JOIN webhook_subscriptions s ON s.tenant = r.tenant AND 'workflow_run.failed' = ANY (s.events)
WHERE r.workflow_run_id = %(workflow_run_id)s AND r.status = 'FAILED';
