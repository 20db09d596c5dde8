"""Webhook subscriptions and their deliveries as the API shows them (docs/webhooks.md)."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from tickwheel.domain.webhooks import WebhookDelivery, WebhookSubscription
from tickwheel.resources.base import Instant, ItemList, Resource


class Webhook(Resource):
    """A subscription. ``secret`` is in the clear only in the answer that created it; every
    later answer masks it (``whsec_…abcd``)."""

    webhook_id: uuid.UUID
    url: str
    events: list[str]
    description: str
    secret: str = Field(description="signs every delivery; shown once, at creation")
    created_at: Instant

    @classmethod
    def of(cls, s: WebhookSubscription) -> Webhook:
        return cls(
            webhook_id=s.webhook_id,
            url=s.url,
            events=[str(e) for e in s.events],
            description=s.description,
            secret=s.secret,
            created_at=s.created_at,
        )


class WebhookList(ItemList[Webhook]):
    """The tenant's subscriptions, oldest first."""


class Delivery(Resource):
    """One notification to one subscription, and what became of its tries."""

    delivery_id: uuid.UUID = Field(description="the Tickwheel-Delivery header: dedupe on it")
    webhook_id: uuid.UUID
    event: str
    status: str = Field(description="PENDING, DELIVERED or FAILED")
    attempts: int
    response_code: int | None
    last_error: str | None
    next_attempt_at: Instant | None
    created_at: Instant
    finished_at: Instant | None
    payload: dict[str, Any] = Field(description="the body's data")

    @classmethod
    def of(cls, d: WebhookDelivery) -> Delivery:
        return cls(
            delivery_id=d.delivery_id,
            webhook_id=d.webhook_id,
            event=str(d.event),
            status=str(d.status),
            attempts=d.attempts,
            response_code=d.response_code,
            last_error=d.last_error,
            next_attempt_at=d.next_attempt_at,
            created_at=d.created_at,
            finished_at=d.finished_at,
            payload=d.payload,
        )


class DeliveryList(ItemList[Delivery]):
    """Newest first."""


class WebhookBody(BaseModel):
    """What ``POST /v1/webhooks`` reads."""

    model_config = ConfigDict(extra="forbid")

    url: StrictStr = Field(min_length=1, max_length=2048)
    events: list[StrictStr] = Field(min_length=1, max_length=10)
    description: StrictStr = Field("", max_length=200)
