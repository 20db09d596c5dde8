"""A tenant's webhook subscriptions: add (the URL judged by the http target rules, the secret
made here and shown once), list, read, remove, and the deliveries of one.

Another tenant's subscription does not exist for the caller (NotFound, as an unknown id)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Final

from tickwheel.domain.clock import Clock
from tickwheel.domain.errors import FieldError, InvalidInput, NotFound
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.domain.webhooks import (
    WebhookDelivery,
    WebhookSubscription,
    check_url,
    mask_secret,
    new_secret,
    parse_events,
)
from tickwheel.store.webhook_protocol import WebhookStore

MAX_PER_TENANT: Final = 25
"""Each subscription adds a delivery to every event it listens to: a bound keeps the failure
path cheap."""
DESCRIPTION_MAX: Final = 200


class WebhookService:
    def __init__(self, store: WebhookStore, tenant: str, clock: Clock, policy: RunPolicy) -> None:
        self.store = store
        self.tenant = tenant
        self.clock = clock
        self.policy = policy

    async def add(self, url: str, events: list[str], description: str = "") -> WebhookSubscription:
        """The new subscription with its secret in the clear: the only time it is shown."""
        parsed = parse_events(events)
        check_url(url, self.policy)
        if len(description) > DESCRIPTION_MAX:
            message = f"longer than {DESCRIPTION_MAX} characters"
            raise InvalidInput(f"description: {message}", [FieldError("description", message)])
        if len(await self.store.webhook_list(self.tenant)) >= MAX_PER_TENANT:
            message = f"a tenant has at most {MAX_PER_TENANT} webhooks: remove one first"
            raise InvalidInput(message, [FieldError("url", message)])
        subscription = WebhookSubscription(
            webhook_id=uuid.uuid4(),
            tenant=self.tenant,
            url=url,
            events=parsed,
            secret=new_secret(),
            created_at=self.clock.now(),
            description=description,
        )
        await self.store.webhook_insert(subscription)
        return subscription

    async def all(self) -> list[WebhookSubscription]:
        return [masked(s) for s in await self.store.webhook_list(self.tenant)]

    async def get(self, webhook_id: str) -> WebhookSubscription:
        found = await self.store.webhook_get(self.tenant, _id(webhook_id))
        if found is None:
            raise NotFound(f"no webhook {webhook_id}")
        return masked(found)

    async def remove(self, webhook_id: str) -> WebhookSubscription:
        """Removes it with its deliveries (pending ones are not sent)."""
        found = await self.get(webhook_id)
        if not await self.store.webhook_delete(self.tenant, found.webhook_id):
            raise NotFound(f"no webhook {webhook_id}")
        return found

    async def deliveries(self, webhook_id: str, limit: int) -> list[WebhookDelivery]:
        found = await self.get(webhook_id)
        return await self.store.webhook_delivery_list(self.tenant, found.webhook_id, limit)


def masked(subscription: WebhookSubscription) -> WebhookSubscription:
    return replace(subscription, secret=mask_secret(subscription.secret))


def _id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise NotFound(f"no webhook {text}") from None
