"""Pauses and circuit breakers in the SDK: ``client.flow`` on ``AsyncClient`` and ``Client``
(docs/flow-control.md). Over HTTP, or in process (``tickwheel.connect``, the tests) through the
same application service the API calls. The answers are the API's resource models
(``resources/flow.py``)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from tickwheel.client.transport import is_http, is_in_process
from tickwheel.resources.flow import DefinitionFlowState, TenantFlowState

if TYPE_CHECKING:
    # The application service of the in-process client, loaded by its first call: a client
    # over HTTP (the CLI) never needs the app layer.
    from tickwheel.app.flow import FlowService
    from tickwheel.client.transports.inprocess import InProcessTransport
    from tickwheel.resources.base import Resource

__all__ = ["DefinitionFlowState", "FlowClient", "FlowSync", "TenantFlowState"]


class _Reader(Protocol):
    """What ``HttpTransport`` offers: a request whose answer is checked against its model."""

    async def _read(
        self, model: type[Resource], method: str, path: str, **kwargs: Any
    ) -> tuple[int, dict[str, Any]]: ...


def _definition(name: str, action: str) -> str:
    return f"/v1/definitions/{quote(name, safe='')}/{action}"


def _tenant(tenant: str | None) -> dict[str, Any]:
    return {"params": {"tenant": tenant}} if tenant is not None else {}


class FlowClient:
    def __init__(self, transport: object) -> None:
        self._http: _Reader | None = None
        self._local: InProcessTransport | None = None
        if is_in_process(transport):
            self._local = transport
        elif is_http(transport):
            self._http = transport

    def _service(self, tenant: str | None = None) -> FlowService:
        assert self._local is not None
        if tenant is not None and tenant != self._local.tenant:
            raise ValueError("an in-process client acts on its own tenant only")
        from tickwheel.app.flow import FlowService

        return FlowService(self._local.store, self._local.tenant, self._local.clock)

    async def _call(
        self, model: type[Resource], method: str, path: str, **kwargs: Any
    ) -> dict[str, Any]:
        if self._http is None:
            raise RuntimeError("this client's transport has no flow control API: use HTTP")
        return (await self._http._read(model, method, path, **kwargs))[1]

    async def pause(self, definition: str, reason: str = "") -> DefinitionFlowState:
        """Nothing new of ``definition`` starts for this tenant until ``resume``; running
        attempts finish; due executions wait READY."""
        if self._local is not None:
            return DefinitionFlowState.of(
                await self._service().pause_definition(definition, reason)
            )
        data = await self._call(
            DefinitionFlowState, "POST", _definition(definition, "pause"), json={"reason": reason}
        )
        return DefinitionFlowState.from_wire(data)

    async def resume(self, definition: str) -> DefinitionFlowState:
        """Lifts the pause (an open circuit breaker stays open until its probe succeeds)."""
        if self._local is not None:
            return DefinitionFlowState.of(await self._service().resume_definition(definition))
        data = await self._call(DefinitionFlowState, "POST", _definition(definition, "resume"))
        return DefinitionFlowState.from_wire(data)

    async def state(self, definition: str) -> DefinitionFlowState:
        """The definition's pauses, circuit breaker and the breaker's latest transitions."""
        if self._local is not None:
            return DefinitionFlowState.of(await self._service().definition(definition))
        data = await self._call(DefinitionFlowState, "GET", _definition(definition, "flow"))
        return DefinitionFlowState.from_wire(data)

    async def pause_tenant(self, reason: str = "", tenant: str | None = None) -> TenantFlowState:
        """The whole tenant (``tenant``: another one, operator keys only)."""
        if self._local is not None:
            return TenantFlowState.of(await self._service(tenant).pause_tenant(reason))
        data = await self._call(
            TenantFlowState, "POST", "/v1/tenant/pause", json={"reason": reason}, **_tenant(tenant)
        )
        return TenantFlowState.from_wire(data)

    async def resume_tenant(self, tenant: str | None = None) -> TenantFlowState:
        if self._local is not None:
            return TenantFlowState.of(await self._service(tenant).resume_tenant())
        data = await self._call(TenantFlowState, "POST", "/v1/tenant/resume", **_tenant(tenant))
        return TenantFlowState.from_wire(data)

    async def tenant_state(self, tenant: str | None = None) -> TenantFlowState:
        """The tenant's pauses and its definitions' circuit breakers."""
        if self._local is not None:
            return TenantFlowState.of(await self._service(tenant).tenant_flow())
        data = await self._call(TenantFlowState, "GET", "/v1/tenant/flow", **_tenant(tenant))
        return TenantFlowState.from_wire(data)

    async def limit_tenant_rate(
        self,
        limit: int,
        period: float | str = 1.0,
        burst: int | None = None,
        tenant: str | None = None,
    ) -> TenantFlowState:
        """At most ``limit`` starts of the tenant's executions per ``period`` (seconds, or
        ``"1s"``, ``"500ms"``, ``"1m"``); ``burst`` at once after a quiet spell (``limit`` when
        unset). Bad values raise the API's 422 as ``InvalidInput``, and change nothing."""
        body: dict[str, Any] = {"limit": limit, "period": period}
        if burst is not None:
            body["burst"] = burst
        if self._local is not None:
            return TenantFlowState.of(await self._service(tenant).limit_tenant_rate(body))
        data = await self._call(
            TenantFlowState, "PUT", "/v1/tenant/rate-limit", json=body, **_tenant(tenant)
        )
        return TenantFlowState.from_wire(data)

    async def unlimit_tenant_rate(self, tenant: str | None = None) -> TenantFlowState:
        """Lifts the tenant's own rate limit (definitions' ``rateLimit`` stay)."""
        if self._local is not None:
            return TenantFlowState.of(await self._service(tenant).unlimit_tenant_rate())
        data = await self._call(
            TenantFlowState, "DELETE", "/v1/tenant/rate-limit", **_tenant(tenant)
        )
        return TenantFlowState.from_wire(data)

    async def weigh_tenant(self, weight: int | None, tenant: str | None = None) -> TenantFlowState:
        """The tenant's share of each claim while several tenants have READY work (``weight``
        executions per turn, 1 to 100; None: back to 1). Operator keys only."""
        if self._local is not None:
            return TenantFlowState.of(await self._service(tenant).weigh_tenant(weight))
        if weight is None:
            data = await self._call(
                TenantFlowState, "DELETE", "/v1/tenant/weight", **_tenant(tenant)
            )
        else:
            data = await self._call(
                TenantFlowState,
                "PUT",
                "/v1/tenant/weight",
                json={"weight": weight},
                **_tenant(tenant),
            )
        return TenantFlowState.from_wire(data)


class FlowSync:
    """``Client.flow``: each method runs its ``FlowClient`` twin on the client's loop."""

    def __init__(self, run: Callable[[Coroutine[Any, Any, Any]], Any], inner: FlowClient) -> None:
        self._run, self._inner = run, inner

    def pause(self, definition: str, reason: str = "") -> DefinitionFlowState:
        result: DefinitionFlowState = self._run(self._inner.pause(definition, reason))
        return result

    def resume(self, definition: str) -> DefinitionFlowState:
        result: DefinitionFlowState = self._run(self._inner.resume(definition))
        return result

    def state(self, definition: str) -> DefinitionFlowState:
        result: DefinitionFlowState = self._run(self._inner.state(definition))
        return result

    def pause_tenant(self, reason: str = "", tenant: str | None = None) -> TenantFlowState:
        result: TenantFlowState = self._run(self._inner.pause_tenant(reason, tenant))
        return result

    def resume_tenant(self, tenant: str | None = None) -> TenantFlowState:
        result: TenantFlowState = self._run(self._inner.resume_tenant(tenant))
        return result

    def tenant_state(self, tenant: str | None = None) -> TenantFlowState:
        result: TenantFlowState = self._run(self._inner.tenant_state(tenant))
        return result

    def limit_tenant_rate(
        self,
        limit: int,
        period: float | str = 1.0,
        burst: int | None = None,
        tenant: str | None = None,
    ) -> TenantFlowState:
        result: TenantFlowState = self._run(
            self._inner.limit_tenant_rate(limit, period, burst, tenant)
        )
        return result

    def unlimit_tenant_rate(self, tenant: str | None = None) -> TenantFlowState:
        result: TenantFlowState = self._run(self._inner.unlimit_tenant_rate(tenant))
        return result

    def weigh_tenant(self, weight: int | None, tenant: str | None = None) -> TenantFlowState:
        result: TenantFlowState = self._run(self._inner.weigh_tenant(weight, tenant))
        return result
