"""``/v1/webhooks``: a tenant's failure notifications (docs/webhooks.md). Adding or removing
one needs ``admin`` (a webhook sends the tenant's failures to a URL of its choosing); reading
needs ``read``. Another tenant's webhook is 404, like an unknown one."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from tickwheel.api.auth import Principal
from tickwheel.api.deps import app_state, principal
from tickwheel.api.error_schema import refusals
from tickwheel.app.webhooks import WebhookService
from tickwheel.domain.models import Scope
from tickwheel.resources.webhooks import (
    Delivery,
    DeliveryList,
    Webhook,
    WebhookBody,
    WebhookList,
)
from tickwheel.store.webhook_protocol import WebhookStore

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])
Who = Annotated[Principal, Depends(principal)]


def _service(request: Request, who: Principal) -> WebhookService:
    state = app_state(request)
    store: WebhookStore = request.app.state.webhooks
    return WebhookService(store, who.tenant, state.clock, state.run_policy)


@router.post("", response_model=Webhook, status_code=201, responses=refusals(403, 413, 422))
async def add_webhook(request: Request, who: Who, body: WebhookBody) -> Webhook:
    """Subscribes ``url`` to ``events``; the answer holds the signing secret, shown only here.
    A URL whose host is a loopback, private or link-local address is refused (422) unless the
    operator allows it."""
    who.require(Scope.ADMIN)
    made = await _service(request, who).add(body.url, list(body.events), body.description)
    return Webhook.of(made)


@router.get("", response_model=WebhookList, responses=refusals(403))
async def list_webhooks(request: Request, who: Who) -> WebhookList:
    who.require(Scope.READ)
    return WebhookList(items=[Webhook.of(s) for s in await _service(request, who).all()])


@router.get("/{webhook_id}", response_model=Webhook, responses=refusals(403, 404))
async def get_webhook(webhook_id: str, request: Request, who: Who) -> Webhook:
    who.require(Scope.READ)
    return Webhook.of(await _service(request, who).get(webhook_id))


@router.delete("/{webhook_id}", response_model=Webhook, responses=refusals(403, 404))
async def remove_webhook(webhook_id: str, request: Request, who: Who) -> Webhook:
    """Removes the subscription and its deliveries (pending ones are never sent)."""
    who.require(Scope.ADMIN)
    return Webhook.of(await _service(request, who).remove(webhook_id))


@router.get(
    "/{webhook_id}/deliveries", response_model=DeliveryList, responses=refusals(403, 404, 422)
)
async def list_deliveries(
    webhook_id: str,
    request: Request,
    who: Who,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> DeliveryList:
    """The newest deliveries first: status, tries, last answer and error, next try."""
    who.require(Scope.READ)
    found = await _service(request, who).deliveries(webhook_id, limit)
    return DeliveryList(items=[Delivery.of(d) for d in found])
