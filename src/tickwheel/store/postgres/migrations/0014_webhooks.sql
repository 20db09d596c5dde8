-- Failure notifications (docs/webhooks.md). A tenant's subscriptions, and one delivery row per
-- (subscription, event): the delivery row is the outbox, written in the transaction of the event
-- itself (an execution dead-lettered, a cron occurrence missed or failed, a workflow run failed),
-- so a notification exists exactly when its event committed. The sender claims due PENDING rows
-- with a lease, posts them, and records the answer on the same row.
-- The secret is kept as written: the sender signs with it (HMAC), so it cannot be a hash.
CREATE TABLE webhook_subscriptions (
    webhook_id   uuid        PRIMARY KEY,
    tenant       text        NOT NULL,
    url          text        NOT NULL,
    events       text[]      NOT NULL,
    secret       text        NOT NULL,
    description  text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL
);
-- The events' "does this tenant listen?" join, and the tenant's listing.
CREATE INDEX webhook_subscriptions_tenant ON webhook_subscriptions (tenant, created_at);

CREATE TABLE webhook_deliveries (
    delivery_id       uuid        PRIMARY KEY,
    webhook_id        uuid        NOT NULL
        REFERENCES webhook_subscriptions (webhook_id) ON DELETE CASCADE,
    tenant            text        NOT NULL,
    event             text        NOT NULL,
    payload           jsonb       NOT NULL,
    status            text        NOT NULL CHECK (status IN ('PENDING', 'DELIVERED', 'FAILED')),
    attempts          integer     NOT NULL DEFAULT 0,
    next_attempt_at   timestamptz,
    lease_owner       text,
    lease_expires_at  timestamptz,
    response_code     integer,
    last_error        text,
    created_at        timestamptz NOT NULL,
    finished_at       timestamptz
);
-- The sender's claim reads only due PENDING rows, in due order.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status = 'PENDING';
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, created_at);
-- The sender's retention: finished rows, oldest first.
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (finished_at)
    WHERE status <> 'PENDING';
