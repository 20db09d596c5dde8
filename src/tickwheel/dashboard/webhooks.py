"""The Webhooks page: the tenant's subscriptions (secrets masked) and, for each, its newest
deliveries with their status, tries, last answer and next try. Read-only: adding and removing
go through the API or the CLI, where the secret can be shown once."""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from tickwheel.api.deps import app_state
from tickwheel.app.webhooks import WebhookService
from tickwheel.dashboard.session import Session
from tickwheel.dashboard.views import render, session_of
from tickwheel.domain.models import Scope
from tickwheel.resources.webhooks import Delivery, Webhook

router = APIRouter(prefix="/dashboard", include_in_schema=False)
Sess = Annotated[Session, Depends(session_of)]
SHOWN: Final = 20
"""Deliveries per webhook on the page (the API pages further: ``?limit=``)."""


@router.get("/webhooks")
async def webhooks(request: Request, session: Sess) -> Response:
    who = session.principal
    who.require(Scope.READ)
    state = app_state(request)
    service = WebhookService(request.app.state.webhooks, who.tenant, state.clock, state.run_policy)
    shown = []
    for subscription in await service.all():
        found = await service.deliveries(str(subscription.webhook_id), SHOWN)
        shown.append(
            {
                "hook": Webhook.of(subscription).to_wire(),
                "deliveries": [Delivery.of(d).to_wire() for d in found],
            }
        )
    return render(request, "webhooks.html", session, webhooks=shown, shown=SHOWN)
