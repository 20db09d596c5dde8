-- Failure notifications (docs/webhooks.md). A tenant's subscriptions, and one delivery row per
-- (subscription, event): the delivery row is the outbox, written in the transaction of the event
-- itself (an execution dead-lettered, a cron occurrence missed or failed, a workflow run failed),
-- so a notification exists exactly when its event committed. The sender claims due PENDING rows
-- with a lease, posts them, and records the answer on the same row.
-- The secret is kept as written: the sender signs with it (HMAC), so it cannot be a hash.
-- events: a JSON array of event names.
CREATE TABLE webhook_subscriptions (
    webhook_id   TEXT    PRIMARY KEY NOT NULL,
    tenant       TEXT    NOT NULL,
    url          TEXT    NOT NULL,
    events       TEXT    NOT NULL,
    secret       TEXT    NOT NULL,
    description  TEXT    NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL
);
-- The events' "does this tenant listen?" join, and the tenant's listing.
CREATE INDEX webhook_subscriptions_tenant ON webhook_subscriptions (tenant, created_at);

CREATE TABLE webhook_deliveries (
    delivery_id       TEXT    PRIMARY KEY NOT NULL,
    webhook_id        TEXT    NOT NULL
        REFERENCES webhook_subscriptions (webhook_id) ON DELETE CASCADE,
    tenant            TEXT    NOT NULL,
    event             TEXT    NOT NULL,
    payload           TEXT    NOT NULL,
    status            TEXT    NOT NULL CHECK (status IN ('PENDING', 'DELIVERED', 'FAILED')),
    attempts          INTEGER NOT NULL DEFAULT 0,
    next_attempt_at   INTEGER,
    lease_owner       TEXT,
    lease_expires_at  INTEGER,
    response_code     INTEGER,
    last_error        TEXT,
    created_at        INTEGER NOT NULL,
    finished_at       INTEGER
);
-- The sender's claim reads only due PENDING rows, in due order.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status = 'PENDING';
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, created_at);
-- The sender's retention: finished rows, oldest first.
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (finished_at)
    WHERE status <> 'PENDING';
