"""The webhook sender: claims due deliveries from the outbox, posts each one signed, and records
the answer on its row (docs/webhooks.md).

At least once: a delivery is claimed with a lease (its ``next_attempt_at`` pushed past the
send, ``SKIP LOCKED`` on PostgreSQL), so several senders never post one row at the same time;
a sender that dies after posting but before recording leaves the row due again when its lease
ends, and the receiver sees it twice. Receivers drop repeats by the ``Tickwheel-Delivery``
header (the delivery id, the same on every try).

Where a delivery may go is the http runner's rule: the host is resolved, every address it
resolves to is checked against the denied ranges (loopback, link-local/metadata, private...)
unless the operator allowed it (``TICKWHEEL_HTTP_ALLOW_NETWORKS`` / ``_HOSTS``), and the
request connects to the checked address itself. A refused destination fails the delivery for
good. Any answer but 2xx, a connection error or a timeout is retried with capped exponential
back-off and full jitter (``domain/backoff.py``) until ``max_attempts``; redirects are not
followed.
"""

from __future__ import annotations

import asyncio
import heapq
import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from tickwheel.domain.addresses import denied_reason, ip_from_host
from tickwheel.domain.backoff import backoff_delay
from tickwheel.domain.clock import Clock, iso
from tickwheel.domain.run_policy import RunPolicy, host_is_allowed
from tickwheel.domain.webhooks import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    MAX_ATTEMPTS,
    SIGNATURE_HEADER,
    DeliveryJob,
    DeliveryStatus,
    sign,
)
from tickwheel.engine.runners.http import Resolver, resolve_host
from tickwheel.engine.service import Service
from tickwheel.store.webhook_protocol import WebhookStore

if TYPE_CHECKING:
    import httpx

# httpx is imported when there is something to post: every scheduler process runs a sender, and
# most never deliver a webhook (as for the http runner, the import was a sixth of a start).

__all__ = ["WebhookSender", "delivery_body"]

_ERROR_LIMIT: Final = 300
RETRY_SLACK: Final = timedelta(milliseconds=50)
"""A retry is claimed this long after its instant: the database's clock decides it is due."""


class _Refused(Exception):
    """The destination is not allowed: retrying will not change that."""


def delivery_body(job: DeliveryJob) -> bytes:
    """The JSON posted: the same bytes on every try of one delivery."""
    d = job.delivery
    document = {
        "id": str(d.delivery_id),
        "type": str(d.event),
        "tenant": d.tenant,
        "createdAt": iso(d.created_at),
        "data": d.payload,
    }
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode("utf-8")


class WebhookSender(Service):
    name = "webhooks"

    def __init__(
        self,
        store: WebhookStore,
        *,
        policy: RunPolicy | None = None,
        clock: Clock | None = None,
        client: httpx.AsyncClient | None = None,
        resolve: Resolver = resolve_host,
        batch: int = 20,
        lease: timedelta = timedelta(seconds=60),
        timeout: float = 10.0,
        base_delay: float = 10.0,
        max_delay: float = 3600.0,
        max_attempts: int = MAX_ATTEMPTS,
        poll_seconds: float = 1.0,
        heard_poll: float = 10.0,
        retention: timedelta | None = timedelta(days=30),
        prune_every: timedelta = timedelta(hours=1),
    ) -> None:
        super().__init__(clock)
        self.store = store
        self.policy = policy or RunPolicy()
        self._client = client
        self._resolve = resolve
        self.batch = batch
        self.lease = lease
        self.timeout = timeout
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_attempts = max_attempts
        self.poll_seconds = poll_seconds
        self.heard_poll = heard_poll
        """Seconds between claims while the store hears every process's new deliveries
        (``webhook_hears_all``): each outbox write wakes the senders, and this sender's own
        retries end the wait when due, so the poll is only a net (a retry recorded by a sender
        that died, a lease run out). One claim a second in every process was a fifth of an idle
        process's round trips (docs/scaling.md, "An idle worker's claims while it hears")."""
        self._retries: list[datetime] = []
        """A heap of the retries this sender recorded and has not claimed since: its wait
        ends at the earliest (plus ``RETRY_SLACK``, for the database's clock)."""
        self._claimed_at: datetime | None = None
        self.retention = retention
        """How long finished deliveries are kept (None: for ever)."""
        self.prune_every = prune_every
        self._next_prune = self.clock.now()

    async def idle(self, did: int) -> None:
        if did or self.stopping:
            await self.pause(0.0)
            return
        timeout = self.poll_seconds
        retries, claimed = self._retries, self._claimed_at
        while retries and claimed is not None and retries[0] + RETRY_SLACK <= claimed:
            heapq.heappop(retries)  # due at the last claim: it took them
        if self.store.webhook_hears_all():
            timeout = max(timeout, self.heard_poll)
            if retries:
                due_in = (retries[0] + RETRY_SLACK - self.clock.now()).total_seconds()
                timeout = max(min(timeout, due_in), 0.0)
        await self.wait_or_stop(self.store.webhook_wait(timeout))

    async def run_once(self) -> int:
        await self._prune()
        self._claimed_at = self.clock.now()
        jobs = await self.store.webhook_delivery_claim(
            self.owner, self.batch, self.lease, self.store_now()
        )
        if not jobs:
            return 0
        import httpx

        if self._client is not None:
            await asyncio.gather(*(self._deliver(self._client, j) for j in jobs))
        else:
            async with httpx.AsyncClient(trust_env=False) as client:
                await asyncio.gather(*(self._deliver(client, j) for j in jobs))
        return len(jobs)

    async def _prune(self) -> None:
        """Once per ``prune_every``: finished deliveries older than ``retention`` go, in
        bounded batches (a few per round, so that sending is never held up for long)."""
        now = self.clock.now()
        if self.retention is None or now < self._next_prune:
            return
        self._next_prune = now + self.prune_every
        for _ in range(10):
            if await self.store.webhook_delivery_prune(now - self.retention, 1000) < 1000:
                return

    async def _deliver(self, client: httpx.AsyncClient, job: DeliveryJob) -> None:
        import httpx

        code: int | None = None
        error: str | None = None
        refused = False
        try:
            code = await self._post(client, job)
            if not 200 <= code < 300:
                error = f"answered {code}"
        except _Refused as exc:
            refused, error = True, str(exc)
        except httpx.TimeoutException as exc:
            error = f"timed out ({type(exc).__name__})"
        except (httpx.HTTPError, OSError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        await self._record(job, code, error, refused)

    async def _record(
        self, job: DeliveryJob, code: int | None, error: str | None, refused: bool
    ) -> None:
        attempts = job.delivery.attempts
        next_at = None
        if error is None:
            status = DeliveryStatus.DELIVERED
        elif refused or attempts >= self.max_attempts:
            status = DeliveryStatus.FAILED
        else:
            status = DeliveryStatus.PENDING
            delay = backoff_delay(attempts, self.base_delay, self.max_delay, self.random.uniform)
            next_at = self.clock.now() + delay
            heapq.heappush(self._retries, next_at)
        recorded = await self.store.webhook_delivery_finish(
            job.delivery,
            self.owner,
            status,
            response_code=code,
            last_error=None if error is None else error[:_ERROR_LIMIT],
            next_attempt_at=next_at,
            now=self.store_now(),
        )
        self.metrics.webhook_try(str(status))
        if not recorded:
            self.log.warning(
                "delivery %s: the lease ran out before its answer was recorded",
                job.delivery.delivery_id,
            )

    async def _post(self, client: httpx.AsyncClient, job: DeliveryJob) -> int:
        body = delivery_body(job)
        timestamp = int(self.clock.now().timestamp())
        import httpx

        url = httpx.URL(job.url)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "tickwheel-webhooks",
            SIGNATURE_HEADER: sign(job.secret, timestamp, body),
            DELIVERY_HEADER: str(job.delivery.delivery_id),
            EVENT_HEADER: str(job.delivery.event),
        }
        extensions: dict[str, str] = {}
        address = await self._checked_address(job.url)
        if address is not None:  # connect to the checked address; the name stays Host and SNI
            headers["Host"] = url.netloc.decode("ascii")
            if url.scheme == "https":
                extensions["sni_hostname"] = url.host
            url = url.copy_with(host=address)
        # Streamed and never read: only the status matters, and a receiver's body (however
        # large) is not loaded.
        async with client.stream(
            "POST",
            url,
            content=body,
            headers=headers,
            timeout=self.timeout,
            follow_redirects=False,
            extensions=extensions,
        ) as response:
            return response.status_code

    async def _checked_address(self, url: str) -> str | None:
        """The address to connect to, once every address of the host passed the rules (None:
        the operator allowed the name itself, so the request goes by name)."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        if host_is_allowed(host, self.policy):
            return None
        literal = ip_from_host(host)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        addresses = [literal] if literal is not None else await self._resolve(host, port)
        if not addresses:
            raise OSError(f"no address for {host!r}")
        for address in addresses:
            if why := denied_reason(address, self.policy.http_allow_networks):
                raise _Refused(
                    f"refused: host {host!r} is {address}, {why}; webhooks do not call it unless"
                    " the operator allows it (TICKWHEEL_HTTP_ALLOW_NETWORKS or _HOSTS)"
                )
        return str(addresses[0])
