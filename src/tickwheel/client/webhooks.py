"""Failure notifications in the SDK: ``client.webhooks`` on ``AsyncClient`` and ``Client``.

Over the HTTP API only (webhooks are managed, not submitted: code inside the server has no use
for them). The answers are the API's resource models (``resources/webhooks.py``)."""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Sequence
from typing import Any, Protocol
from urllib.parse import quote

from tickwheel.client.blocking import Facade, Run, blocking
from tickwheel.resources.base import Resource
from tickwheel.resources.webhooks import Delivery, DeliveryList, Webhook, WebhookList

__all__ = ["Delivery", "Webhook", "WebhooksClient", "WebhooksSync"]

WebhookRef = uuid.UUID | str


class _Reader(Protocol):
    """What ``HttpTransport`` offers: a request whose answer is checked against its model."""

    async def _read(
        self, model: type[Resource], method: str, path: str, **kwargs: Any
    ) -> tuple[int, dict[str, Any]]: ...


def _path(ref: WebhookRef, tail: str = "") -> str:
    return f"/v1/webhooks/{quote(str(ref), safe='')}{tail}"


class WebhooksClient:
    def __init__(self, transport: _Reader | None) -> None:
        self._transport = transport

    @property
    def transport(self) -> _Reader:
        if self._transport is None:
            raise RuntimeError("this client's transport has no webhook API: use HTTP")
        return self._transport

    async def add(self, url: str, events: Sequence[str], description: str = "") -> Webhook:
        """Subscribes ``url`` to ``events`` (``execution.failed``, ``cron.missed``,
        ``cron.failed``, ``workflow_run.failed``). Keep ``.secret``: it is never shown again."""
        body = {"url": url, "events": list(events), "description": description}
        _, data = await self.transport._read(Webhook, "POST", "/v1/webhooks", json=body)
        return Webhook.from_wire(data)

    async def list(self) -> builtins.list[Webhook]:
        _, data = await self.transport._read(WebhookList, "GET", "/v1/webhooks")
        return WebhookList.from_wire(data).items

    async def get(self, webhook_id: WebhookRef) -> Webhook:
        _, data = await self.transport._read(Webhook, "GET", _path(webhook_id))
        return Webhook.from_wire(data)

    async def remove(self, webhook_id: WebhookRef) -> Webhook:
        _, data = await self.transport._read(Webhook, "DELETE", _path(webhook_id))
        return Webhook.from_wire(data)

    async def deliveries(self, webhook_id: WebhookRef, limit: int = 50) -> builtins.list[Delivery]:
        """The newest first."""
        path = _path(webhook_id, "/deliveries")
        _, data = await self.transport._read(DeliveryList, "GET", path, params={"limit": limit})
        return DeliveryList.from_wire(data).items


class WebhooksSync(Facade):
    """``Client.webhooks``: each method runs its ``WebhooksClient`` twin on the client's loop
    (made from it: ``blocking.py``)."""

    def __init__(self, run: Run, inner: WebhooksClient) -> None:
        super().__init__(run, inner)

    add = blocking(WebhooksClient.add)
    list = blocking(WebhooksClient.list)
    get = blocking(WebhooksClient.get)
    remove = blocking(WebhooksClient.remove)
    deliveries = blocking(WebhooksClient.deliveries)
