"""Request-scoped dependencies: who is calling, and a transport bound to their tenant."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from tickwheel.api.auth import KeyCache, Principal, authenticate
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.domain.clock import Clock
from tickwheel.domain.models import Scope
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.domain.submission import SubmitLimits
from tickwheel.store.cron_protocol import CronStore
from tickwheel.store.protocol import Store
from tickwheel.store.workflow_protocol import WorkflowStore


@dataclass
class AppState:
    store: Store
    clock: Clock
    limits: SubmitLimits
    run_policy: RunPolicy
    auth_disabled: bool
    default_tenant: str
    cron: CronStore
    workflows: WorkflowStore
    keys: KeyCache = field(default_factory=KeyCache)


def app_state(request: Request) -> AppState:
    state: AppState = request.app.state.tickwheel
    return state


BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="apiKey",
    bearerFormat="tw_<key id>_<secret>",
    description="An API key of the tenant (tickwheel keys create): 'Authorization: Bearer <key>'.",
)
"""Declares the scheme in OpenAPI, and on every route that needs a key. It refuses nothing
itself (``authenticate`` does, with the API's error body)."""


async def principal(
    request: Request,
    _declared: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)] = None,
) -> Principal:
    return await principal_of(app_state(request), request.headers.get("authorization"))


async def principal_of(state: AppState, authorization: str | None) -> Principal:
    if state.auth_disabled:
        # Without keys whoever reaches the server runs the cluster: the operator.
        return Principal(tenant=state.default_tenant, scope=Scope.OPERATOR, key_id=None)
    return await authenticate(state.store, authorization, state.keys)


def transport_for(request: Request, who: Principal) -> InProcessTransport:
    return transport_of(app_state(request), who)


def transport_of(state: AppState, who: Principal) -> InProcessTransport:
    return InProcessTransport(state.store, who.tenant, state.clock, state.limits, state.run_policy)
