"""Webhook subscriptions and deliveries on SQLite, on the main store's connection and lock; and
the outbox writers the event paths call inside their own transactions (``webhook_outbox_*``)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import aiosqlite

from tickwheel.domain.webhooks import (
    DeliveryJob,
    DeliveryStatus,
    WebhookDelivery,
    WebhookEvent,
    WebhookSubscription,
    cron_webhook_event,
)
from tickwheel.store.sqlite.codec import from_us, jload_object, opt_us, to_us
from tickwheel.store.sqlite.connection import Q, SqliteConnection

if TYPE_CHECKING:  # the cron domain: the Cron Service's, not the webhook sender's
    from tickwheel.domain.cron_jobs import OccurrenceRecord


class SqliteWebhookStore(SqliteConnection):
    async def webhook_wait(self, timeout: float) -> bool:
        # Outbox rows of another process on the file signal nothing here: polled.
        await asyncio.sleep(timeout)
        return False

    def webhook_hears_all(self) -> bool:
        return False

    async def _rowcount(self, query: str, params: dict[str, Any]) -> int:
        async with self._tx() as conn:
            return (await conn.execute(Q[query], params)).rowcount

    async def webhook_insert(self, subscription: WebhookSubscription) -> None:
        params = {
            "webhook_id": str(subscription.webhook_id),
            "tenant": subscription.tenant,
            "url": subscription.url,
            "events": json.dumps([str(e) for e in subscription.events]),
            "secret": subscription.secret,
            "description": subscription.description,
            "created_at": to_us(subscription.created_at),
        }
        await self._rowcount("webhook_insert", params)

    async def webhook_list(self, tenant: str) -> list[WebhookSubscription]:
        return [_subscription(r) for r in await self._all("webhook_list", {"tenant": tenant})]

    async def webhook_get(self, tenant: str, webhook_id: uuid.UUID) -> WebhookSubscription | None:
        params = {"tenant": tenant, "webhook_id": str(webhook_id)}
        rows = await self._all("webhook_get", params)
        return _subscription(rows[0]) if rows else None

    async def webhook_delete(self, tenant: str, webhook_id: uuid.UUID) -> bool:
        params = {"tenant": tenant, "webhook_id": str(webhook_id)}
        return await self._rowcount("webhook_delete", params) == 1

    async def webhook_delivery_list(
        self, tenant: str, webhook_id: uuid.UUID, limit: int
    ) -> list[WebhookDelivery]:
        params = {"tenant": tenant, "webhook_id": str(webhook_id), "limit": limit}
        return [_delivery(r) for r in await self._all("webhook_delivery_list", params)]

    async def webhook_delivery_claim(
        self, owner: str, limit: int, lease: timedelta, now: datetime | None = None
    ) -> list[DeliveryJob]:
        at = now or datetime.now(UTC)
        params = {
            "owner": owner,
            "limit": limit,
            "now": to_us(at),
            "lease_expires_at": to_us(at + lease),
        }
        async with self._tx() as conn:
            cursor = await conn.execute(Q["webhook_delivery_claim"], params)
            ids = [r["delivery_id"] for r in await cursor.fetchall()]
            if not ids:
                return []
            cursor = await conn.execute(
                Q["webhook_delivery_claimed"], {"delivery_ids": json.dumps(ids)}
            )
            rows = list(await cursor.fetchall())
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
            "delivery_id": str(delivery.delivery_id),
            "owner": owner,
            "attempts": delivery.attempts,
            "status": str(status),
            "response_code": response_code,
            "last_error": last_error,
            "next_attempt_at": opt_us(next_attempt_at),
            "now": to_us(now or datetime.now(UTC)),
        }
        return await self._rowcount("webhook_delivery_finish", params) == 1

    async def webhook_delivery_prune(self, before: datetime, limit: int) -> int:
        params = {"before": to_us(before), "limit": limit}
        return await self._rowcount("webhook_delivery_prune", params)


async def webhook_outbox_execution_failed(
    conn: aiosqlite.Connection, execution_ids: Sequence[uuid.UUID], now_us: int
) -> None:
    """The dead letters' outbox rows, in the caller's transaction (only for those of
    ``execution_ids`` that are FAILED; none for a tenant without a subscription)."""
    if execution_ids:
        params = {"execution_ids": json.dumps([str(i) for i in execution_ids]), "now": now_us}
        await conn.execute(Q["webhook_outbox_execution_failed"], params)


async def webhook_outbox_cron(
    conn: aiosqlite.Connection, records: Sequence[OccurrenceRecord]
) -> None:
    """The missed and failed occurrences' outbox rows, in the caller's transaction, due when
    each was recorded."""
    rows = [
        {
            "cron_job_id": str(r.cron_job_id),
            "occurrence": to_us(r.occurrence),
            "outcome": str(r.outcome),
            "reason": r.reason,
            "event": str(event),
            "now": to_us(r.recorded_at),
        }
        for r in records
        if (event := cron_webhook_event(r.outcome)) is not None
    ]
    if rows:
        await conn.executemany(Q["webhook_outbox_cron"], rows)


async def webhook_outbox_workflow_run_failed(
    conn: aiosqlite.Connection, workflow_run_id: uuid.UUID, now: datetime
) -> None:
    params = {"workflow_run_id": str(workflow_run_id), "now": to_us(now)}
    await conn.execute(Q["webhook_outbox_workflow_run_failed"], params)


def _subscription(r: sqlite3.Row) -> WebhookSubscription:
    return WebhookSubscription(
        webhook_id=uuid.UUID(r["webhook_id"]),
        tenant=r["tenant"],
        url=r["url"],
        events=tuple(WebhookEvent(e) for e in json.loads(r["events"])),
        secret=r["secret"],
        created_at=from_us(r["created_at"]),
        description=r["description"],
    )


def _delivery(r: sqlite3.Row) -> WebhookDelivery:
    return WebhookDelivery(
        delivery_id=uuid.UUID(r["delivery_id"]),
        webhook_id=uuid.UUID(r["webhook_id"]),
        tenant=r["tenant"],
        event=WebhookEvent(r["event"]),
        payload=jload_object(r["payload"]),
        status=DeliveryStatus(r["status"]),
        attempts=r["attempts"],
        next_attempt_at=from_us(r["next_attempt_at"]) if r["next_attempt_at"] is not None else None,
        response_code=r["response_code"],
        last_error=r["last_error"],
        created_at=from_us(r["created_at"]),
        finished_at=from_us(r["finished_at"]) if r["finished_at"] is not None else None,
    )
