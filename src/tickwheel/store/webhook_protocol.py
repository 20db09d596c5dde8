"""The WebhookStore protocol: a tenant's webhook subscriptions and their deliveries, and the
sender's claim and record of each delivery.

Apart from ``Store`` like the other groups of tables. The outbox rows themselves are written
by the stores that own the events (dead letters, cron occurrences, workflow runs), inside the
event's own transaction, so this protocol only reads and advances them."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Protocol

from tickwheel.domain.webhooks import (
    DeliveryJob,
    DeliveryStatus,
    WebhookDelivery,
    WebhookSubscription,
)


class WebhookStore(Protocol):
    async def webhook_wait(self, timeout: float) -> bool:
        """Sleeps until deliveries were written (True) or ``timeout`` seconds pass (False)."""
        ...

    def webhook_hears_all(self) -> bool:
        """Whether every process's new deliveries wake ``webhook_wait`` now (``hears_all``)."""
        ...

    async def webhook_insert(self, subscription: WebhookSubscription) -> None: ...

    async def webhook_list(self, tenant: str) -> list[WebhookSubscription]: ...

    async def webhook_get(self, tenant: str, webhook_id: uuid.UUID) -> WebhookSubscription | None:
        """None when it does not exist or belongs to another tenant."""
        ...

    async def webhook_delete(self, tenant: str, webhook_id: uuid.UUID) -> bool:
        """Deletes it and its deliveries; False when the tenant has no such subscription."""
        ...

    async def webhook_delivery_list(
        self, tenant: str, webhook_id: uuid.UUID, limit: int
    ) -> list[WebhookDelivery]:
        """Newest first."""
        ...

    async def webhook_delivery_claim(
        self, owner: str, limit: int, lease: timedelta, now: datetime | None = None
    ) -> list[DeliveryJob]:
        """Up to ``limit`` PENDING deliveries due at ``now`` (the database's clock when None),
        leased to ``owner`` for ``lease``: no other sender claims them until it ends. Each
        claim counts one attempt."""
        ...

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
        """Records the try of a claimed delivery (``delivery`` as claimed); False, and nothing
        written, when ``owner``'s claim of that attempt no longer holds."""
        ...

    async def webhook_delivery_prune(self, before: datetime, limit: int) -> int:
        """Deletes up to ``limit`` DELIVERED or FAILED deliveries finished before ``before``,
        oldest first; returns how many (PENDING ones are never deleted)."""
        ...
