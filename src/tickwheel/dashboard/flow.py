"""Pauses, circuit breakers and rate limits on the dashboard (docs/flow-control.md): the
definition page's flow panel (paused badge, pauses, breaker state and transitions, rate limits
with their tokens, a Pause or Resume button) and the state column of the definitions list. The
button goes through ``app.flow.FlowService``, the same service as ``POST
/v1/definitions/{name}/pause``, with the same admin scope."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from tickwheel.api.deps import app_state
from tickwheel.app.flow import FlowService
from tickwheel.dashboard.session import Session
from tickwheel.dashboard.views import back, checked_form, error_page, session_of
from tickwheel.domain.definition_refs import stored_name
from tickwheel.domain.errors import Forbidden, NotFound, TickwheelError
from tickwheel.domain.models import Scope
from tickwheel.domain.pauses import TENANT_WIDE
from tickwheel.domain.rate_limits import EPSILON
from tickwheel.resources.flow import DefinitionFlowState, RateLimit

router = APIRouter(prefix="/dashboard", include_in_schema=False)
Sess = Annotated[Session, Depends(session_of)]


def service(request: Request, session: Session) -> FlowService:
    state = app_state(request)
    return FlowService(state.store, session.principal.tenant, state.clock)


async def definition_panel(request: Request, session: Session, name: str) -> dict[str, Any]:
    """What the definition page shows of its flow control, as the API's JSON shape."""
    flow = await service(request, session).definition(name)
    return {
        "flow": DefinitionFlowState.of(flow).to_wire(),
        "can_pause": session.principal.scope.allows(Scope.ADMIN),
    }


async def list_states(request: Request, session: Session) -> dict[str, Any]:
    """Per definition name: "paused" or a breaker's state other than closed; and whether the
    whole tenant is paused."""
    tenant = await service(request, session).tenant_flow()
    states: dict[str, str] = {}
    for b in tenant.breakers:
        if str(b.breaker.state) != "closed":
            states[stored_name(b.definition_uri)] = f"breaker {b.breaker.state}"
    for p in tenant.pauses:
        if p.definition_uri != TENANT_WIDE and p.kind == "manual":
            states[stored_name(p.definition_uri)] = "paused"
    for r in tenant.rate_limits:
        if r.definition_uri != TENANT_WIDE and r.tokens < 1.0 - EPSILON:
            states.setdefault(stored_name(r.definition_uri), "rate limited")
    tenant_rate = next((r for r in tenant.rate_limits if r.definition_uri == TENANT_WIDE), None)
    return {
        "flow_states": states,
        "tenant_paused": tenant.paused,
        "tenant_rate": None if tenant_rate is None else RateLimit.of(tenant_rate).to_wire(),
        "tenant_weight": tenant.weight,
    }


@router.post("/definitions/{name}/{action}")
async def definition_action(name: str, action: str, request: Request, session: Sess) -> Response:
    form = await checked_form(request, session)
    here = f"/dashboard/definitions/{name}"
    if action not in ("pause", "resume"):
        return error_page(request, session, NotFound(f"no definition action {action!r}"), 404)
    try:
        session.principal.require(Scope.ADMIN)
        flow = service(request, session)
        if action == "pause":
            await flow.pause_definition(name, form.get("reason", [""])[0])
        else:
            await flow.resume_definition(name)
    except Forbidden as exc:
        return error_page(request, session, exc, 403)
    except NotFound as exc:
        return error_page(request, session, exc, 404)
    except TickwheelError as exc:
        return back(here, exc.message)
    if action == "pause":
        return back(here, "Paused: nothing new of it starts; running attempts finish.")
    return back(here, "Resumed: what waited is claimed now.")
