"""Webhook subscriptions and deliveries on PostgreSQL, on the main store's pool; and the outbox
writers the event paths call inside their own transactions (``webhook_outbox_*``)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool

from tickwheel.domain.webhooks import (
    DeliveryJob,
    DeliveryStatus,
    WebhookDelivery,
    WebhookEvent,
    WebhookSubscription,
    cron_webhook_event,
)
from tickwheel.store.postgres.notify import WAKE_WEBHOOK_SENDERS, Signals
from tickwheel.store.postgres.pool import Conn
from tickwheel.store.postgres.rows import opt_aware, opt_utc, require_aware, utc
from tickwheel.store.records import Topic
from tickwheel.store.sqlfile import load_queries

if TYPE_CHECKING:  # the cron domain: the Cron Service's, not the webhook sender's
    from tickwheel.domain.cron_jobs import OccurrenceRecord

Q = load_queries("tickwheel.store.postgres.sql")


class PostgresWebhookStore:
    def __init__(self, pool: AsyncConnectionPool[Conn], signals: Signals | None = None) -> None:
        self._pool = pool
        self._signals = signals
        """The main store's LISTEN/NOTIFY (``webhook_store_for``); None: new deliveries wake
        nobody, and ``webhook_wait`` just waits out its timeout."""

    async def webhook_wait(self, timeout: float) -> bool:
        if self._signals is None:
            await asyncio.sleep(timeout)
            return False
        return await self._signals.wait_for(Topic.WEBHOOK, timeout)

    def webhook_hears_all(self) -> bool:
        return self._signals is not None and self._signals.hearing()

    async def _all(self, query: str, params: dict[str, Any]) -> list[DictRow]:
        async with self._pool.connection() as conn:
            return await (await conn.execute(Q[query], params)).fetchall()

    async def _rowcount(self, query: str, params: dict[str, Any]) -> int:
        async with self._pool.connection() as conn:
            return (await conn.execute(Q[query], params)).rowcount

    async def webhook_insert(self, subscription: WebhookSubscription) -> None:
        params = {
            "webhook_id": subscription.webhook_id,
            "tenant": subscription.tenant,
            "url": subscription.url,
            "events": [str(e) for e in subscription.events],
            "secret": subscription.secret,
            "description": subscription.description,
            "created_at": require_aware(subscription.created_at),
        }
        await self._rowcount("webhook_insert", params)

    async def webhook_list(self, tenant: str) -> list[WebhookSubscription]:
        return [_subscription(r) for r in await self._all("webhook_list", {"tenant": tenant})]

    async def webhook_get(self, tenant: str, webhook_id: uuid.UUID) -> WebhookSubscription | None:
        rows = await self._all("webhook_get", {"tenant": tenant, "webhook_id": webhook_id})
        return _subscription(rows[0]) if rows else None

    async def webhook_delete(self, tenant: str, webhook_id: uuid.UUID) -> bool:
        params = {"tenant": tenant, "webhook_id": webhook_id}
        return await self._rowcount("webhook_delete", params) == 1

    async def webhook_delivery_list(
        self, tenant: str, webhook_id: uuid.UUID, limit: int
    ) -> list[WebhookDelivery]:
        params = {"tenant": tenant, "webhook_id": webhook_id, "limit": limit}
        return [_delivery(r) for r in await self._all("webhook_delivery_list", params)]

    async def webhook_delivery_claim(
        self, owner: str, limit: int, lease: timedelta, now: datetime | None = None
    ) -> list[DeliveryJob]:
        params = {"owner": owner, "limit": limit, "lease": lease, "now": opt_aware(now)}
        rows = await self._all("webhook_delivery_claim", params)
        return [DeliveryJob(_delivery(r), r["url"], r["secret"]) for r in rows]

    async def webhook_delivery_finish(
        self,
        delivery: WebhookDelivery,
        owner: str,
        status: DeliveryStatus,
        *,
        response_code: int | None,
        last_error: str | None,
        next_attempt_at: datetime | None,
        now: datetime | None = None,
    ) -> bool:
        params = {
            "delivery_id": delivery.delivery_id,
            "owner": owner,
            "attempts": delivery.attempts,
            "status": str(status),
            "response_code": response_code,
            "last_error": last_error,
            "next_attempt_at": opt_aware(next_attempt_at),
            "now": opt_aware(now),
        }
        return await self._rowcount("webhook_delivery_finish", params) == 1

    async def webhook_delivery_prune(self, before: datetime, limit: int) -> int:
        params = {"before": require_aware(before), "limit": limit}
        return await self._rowcount("webhook_delivery_prune", params)


async def webhook_outbox_cron(conn: Conn, records: Sequence[OccurrenceRecord]) -> None:
    """The missed and failed occurrences' outbox rows, in the caller's transaction."""
    noted = [(r, e) for r in records if (e := cron_webhook_event(r.outcome)) is not None]
    if not noted:
        return
    params = {
        "cron_job_id": [r.cron_job_id for r, _ in noted],
        "occurrence": [r.occurrence for r, _ in noted],
        "outcome": [str(r.outcome) for r, _ in noted],
        "reason": [r.reason for r, _ in noted],
        "event": [str(e) for _, e in noted],
        "recorded_at": [require_aware(r.recorded_at) for r, _ in noted],
    }
    if (await conn.execute(Q["webhook_outbox_cron"], params)).rowcount:
        await conn.execute(WAKE_WEBHOOK_SENDERS)


async def webhook_outbox_workflow_run_failed(
    conn: Conn, workflow_run_id: uuid.UUID, now: datetime
) -> None:
    params = {"workflow_run_id": workflow_run_id, "now": require_aware(now)}
    if (await conn.execute(Q["webhook_outbox_workflow_run_failed"], params)).rowcount:
        await conn.execute(WAKE_WEBHOOK_SENDERS)


def _subscription(r: DictRow) -> WebhookSubscription:
    return WebhookSubscription(
        webhook_id=r["webhook_id"],
        tenant=r["tenant"],
        url=r["url"],
        events=tuple(WebhookEvent(e) for e in r["events"]),
        secret=r["secret"],
        created_at=utc(r["created_at"]),
        description=r["description"],
    )


def _delivery(r: DictRow) -> WebhookDelivery:
    return WebhookDelivery(
        delivery_id=r["delivery_id"],
        webhook_id=r["webhook_id"],
        tenant=r["tenant"],
        event=WebhookEvent(r["event"]),
        payload=r["payload"],
        status=DeliveryStatus(r["status"]),
        attempts=r["attempts"],
        next_attempt_at=opt_utc(r["next_attempt_at"]),
        response_code=r["response_code"],
        last_error=r["last_error"],
        created_at=utc(r["created_at"]),
        finished_at=opt_utc(r["finished_at"]),
    )
