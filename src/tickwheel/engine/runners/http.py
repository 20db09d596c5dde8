"""``http`` executions: send the inputs as a JSON body to a URL; the answer's JSON object body is
the output.

Each request carries the definition's headers plus ``Idempotency-Key: <execution_id>`` (the same
on every attempt, so the receiver can drop repeats), ``X-Tickwheel-Attempt`` and
``X-Tickwheel-Fencing-Token``, and in a traced attempt the attempt span's W3C ``traceparent``
(docs/tracing.md). GET sends no body. Redirects are not followed (a 3xx fails for good, naming
where it points), so no hop escapes the checks below.

Where a request may go is the worker's ``RunPolicy`` (docs/worker_policy.md): the host is
resolved, EVERY address it resolves to is checked against the denied ranges (loopback,
link-local/metadata, private, ...) unless the operator allowed it, and the request then connects
to the checked address itself (the URL's host stays in ``Host`` and in TLS's SNI and certificate
check), so a second DNS answer (rebinding) cannot send it elsewhere. Environment proxies are not
used. A refused destination is a permanent failure.

``${{ secrets.NAME }}`` in headers and the query are filled in from the worker's secrets for this
request only; a missing one is a permanent failure naming it. Messages name the URL as written
in the definition and never hold a secret's value.

How answers map to outcomes: 2xx is success, its body a JSON object (an empty body means ``{}``;
other JSON or a non-JSON body is "invalid_output"). A 429 or 503 with a ``Retry-After`` is a
snooze: the execution runs again that much later (at most ``retry_after_max``, 300 s) without
the attempt counting as a failure. Other 429 and 5xx are "server_error" and retried; other
statuses are "client_error", which retrying will not fix. A connection that fails is "error"
and one that times out is "timeout", both retried. The failure detail keeps the status and a
short excerpt of the body's start (``excerpt_limit``, 256 bytes, control characters dropped,
secrets masked): enough to see an error message, too little to make an execution's error a way
to read whatever a destination serves.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

from tickwheel.domain.addresses import IPAddress, denied_reason, ip_from_host
from tickwheel.domain.definitions import Definition, HttpExecution
from tickwheel.domain.fieldtypes import json_type_name
from tickwheel.domain.run_policy import RunPolicy, host_is_allowed, run_problems
from tickwheel.domain.running import MAX_SNOOZE
from tickwheel.domain.secret_refs import MissingSecret, redact, render
from tickwheel.engine.runners.base import JobContext, RunOutcome, failure, shorten
from tickwheel.engine.runners.retry_after import RETRY_AFTER_MAX, retry_after
from tickwheel.engine.runners.secrets import Secrets, SecretsFileError
from tickwheel.observability.tracing import current_context

if TYPE_CHECKING:
    import httpx

# httpx is imported where a request is made, not here: every worker and scheduler builds this
# runner (and the webhook sender its resolver) at start, and most never send a request, while
# importing httpx cost them a sixth of their start-up (docs/scaling.md).

__all__ = ["BODY_LIMIT", "EXCERPT_LIMIT", "HttpRunner", "Resolver", "resolve_host"]

BODY_LIMIT: Final = 1024 * 1024  # the most of a response body that is read
EXCERPT_LIMIT: Final = 256  # how much of a body's start a failure keeps
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]


async def resolve_host(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (the system resolver, off the event loop)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        ip = ip_from_host(str(sockaddr[0]))
        if ip is not None and ip not in found:
            found.append(ip)
    return found


class _Refused(Exception):
    """The attempt cannot go ahead, for good (policy, secrets); the message says why."""


class HttpRunner:
    """Runs ``http`` executions. ``client`` is shared across attempts when given (its owner
    closes it); otherwise each attempt opens and closes its own."""

    def __init__(
        self,
        client: httpx.AsyncClient | None = None,
        *,
        body_limit: int = BODY_LIMIT,
        excerpt_limit: int = EXCERPT_LIMIT,
        policy: RunPolicy | None = None,
        secrets: Secrets | None = None,
        resolve: Resolver = resolve_host,
        retry_after_max: float = RETRY_AFTER_MAX,
    ) -> None:
        self._client = client
        self.retry_after_max = min(retry_after_max, MAX_SNOOZE)
        self.body_limit = body_limit
        self.excerpt_limit = excerpt_limit
        self.policy = policy or RunPolicy()
        self.secrets = secrets or Secrets()
        self._resolve = resolve

    async def run(
        self, definition: Definition, inputs: dict[str, Any], ctx: JobContext
    ) -> RunOutcome:
        execution = definition.execution
        if not isinstance(execution, HttpExecution):
            return failure("permanent", f"the http runner cannot run a {execution.type} job")
        import httpx  # on first use (see the imports)

        what = f"{execution.method} {shorten(execution.url, 200)}"  # as written: no secrets
        if problems := run_problems(execution, self.policy):
            return failure("permanent", f"{what}: refused: {'; '.join(problems)}")
        try:
            request = _Request(execution, inputs, ctx, definition.timeout)
        except httpx.InvalidURL as exc:
            return failure("permanent", f"{what}: {exc}")
        try:
            request.fill_secrets(self.secrets)
            await self._pin(request)
        except _Refused as exc:
            return failure("permanent", f"{what}: {exc}")
        except OSError as exc:  # the resolver failed (socket.gaierror): may pass
            return failure("error", f"{what}: cannot resolve {request.host!r}: {exc}")
        if self._client is not None:
            outcome = await self._send(self._client, request, what)
        else:
            async with httpx.AsyncClient(trust_env=False) as client:
                outcome = await self._send(client, request, what)
        return _masked(outcome, request.secret_values)

    async def _pin(self, request: _Request) -> None:
        """Resolve the host, refuse it if any of its addresses is denied, and point the request
        at the first one, so that what is checked is what is connected to."""
        host, allowed_by_name = request.host, host_is_allowed(request.host, self.policy)
        literal = ip_from_host(host)
        addresses = [literal] if literal is not None else await self._resolve(host, request.port)
        if not addresses:
            raise OSError(f"no address for {host!r}")
        for address in addresses:
            why = (
                None if allowed_by_name else denied_reason(address, self.policy.http_allow_networks)
            )
            if why:
                raise _Refused(
                    f"refused: host {host!r} is {address}, {why}; workers do not call it unless"
                    " the operator allows it (TICKWHEEL_HTTP_ALLOW_NETWORKS or"
                    " TICKWHEEL_HTTP_ALLOW_HOSTS)"
                )
        request.pin(addresses[0])

    async def _send(self, client: httpx.AsyncClient, request: _Request, what: str) -> RunOutcome:
        import httpx

        try:
            async with client.stream(
                request.method,
                request.url,
                headers=request.headers,
                content=request.content,
                timeout=request.timeout,
                follow_redirects=False,
                extensions=request.extensions,
            ) as response:
                body = await self._read(response)
        except httpx.TimeoutException as exc:
            return failure("timeout", f"{what}: timed out ({type(exc).__name__})")
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            return failure("permanent", f"{what}: {exc}")
        except httpx.HTTPError as exc:  # refused, reset, protocol errors: may pass
            return failure("error", f"{what}: {type(exc).__name__}: {exc}")
        return self._outcome(what, response, body)

    async def _read(self, response: httpx.Response) -> bytes:
        """The body, read up to one byte past ``body_limit`` (the rest is not read at all)."""
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > self.body_limit:
                break
        return bytes(body[: self.body_limit + 1])

    def _outcome(self, what: str, response: httpx.Response, body: bytes) -> RunOutcome:
        status = response.status_code
        excerpt = _CONTROL.sub("", body[: self.excerpt_limit].decode("utf-8", errors="replace"))
        detail: dict[str, Any] = {"status": status, "body_excerpt": excerpt}
        if not 200 <= status < 300:
            answered = f"{what} answered {status} {response.reason_phrase}".rstrip()
            if status in (429, 503) and self.retry_after_max > 0:
                wait = retry_after(response.headers, self.retry_after_max)
                if wait is not None:  # the server said when: a snooze, not a failure
                    return RunOutcome(ok=False, snooze=wait, message=answered)
            if status == 429 or status >= 500:
                if "retry-after" in response.headers:
                    detail["retry_after"] = response.headers["retry-after"]
                return failure("server_error", answered, **detail)
            if 300 <= status < 400 and "location" in response.headers:
                location = shorten(response.headers["location"], 200)
                answered += f" (redirects to {location}; point the definition there)"
            return failure("client_error", answered, **detail)
        if len(body) > self.body_limit:
            return failure(
                "invalid_output",
                f"{what}: the response body is over {self.body_limit} bytes",
                status=status,
            )
        if not body.strip():
            return RunOutcome(ok=True, output={})
        try:
            value = json.loads(body)
        except ValueError:
            return failure("invalid_output", f"{what}: the response body is not JSON", **detail)
        if not isinstance(value, dict):
            kind = json_type_name(value)
            return failure(
                "invalid_output",
                f"{what}: the response body must be a JSON object, got {kind}",
                **detail,
            )
        return RunOutcome(ok=True, output=value)


def _masked(outcome: RunOutcome, values: list[str]) -> RunOutcome:
    """``outcome`` with every secret value used by the request masked out of its message and
    detail (an endpoint may echo a header back; an error may quote the URL)."""
    if outcome.ok or not values:
        return outcome
    detail = {
        k: redact(v, values) if isinstance(v, str) else v for k, v in (outcome.detail or {}).items()
    }
    return RunOutcome(
        ok=False,
        kind=outcome.kind,
        message=redact(outcome.message, values),
        detail=detail or None,
    )


class _Request:
    """What to send for one attempt."""

    def __init__(
        self, execution: HttpExecution, inputs: dict[str, Any], ctx: JobContext, timeout: float
    ) -> None:
        import httpx

        self.method = execution.method
        self._template = execution
        self.url = httpx.URL(execution.url)
        self.host = self.url.raw_host.decode("ascii")
        self.port = self.url.port or (443 if self.url.scheme == "https" else 80)
        self.extensions: dict[str, Any] = {}
        self.secret_values: list[str] = []
        self.headers = httpx.Headers(list(execution.headers))
        # The attempt's span (docs/tracing.md), for a receiver that continues traces.
        self.headers.update(current_context() or {})
        # Ours win over the definition's: the idempotency key is the promise to the receiver.
        self.headers["Idempotency-Key"] = str(ctx.execution_id)
        self.headers["X-Tickwheel-Attempt"] = str(ctx.attempt)
        self.headers["X-Tickwheel-Fencing-Token"] = str(ctx.fencing_token)
        self.content: bytes | None = None
        if self.method != "GET":
            self.content = json.dumps(inputs).encode()
            self.headers["Content-Type"] = "application/json"
        # httpx's own default (5 s) would cut off a slow but legitimate job: use the definition's.
        self.timeout = httpx.Timeout(timeout)

    def fill_secrets(self, secrets: Secrets) -> None:
        """Replace the references in the URL's query and the headers by their values."""
        used = self.secret_values
        try:
            raw = self._template.url.partition("?")[2].partition("#")[0]
            if "${{" in raw:
                filled = render(raw, secrets.lookup, quote=_quote, resolved=used)
                self.url = self.url.copy_with(query=filled.encode("ascii"))
            for name, value in self._template.headers:
                if "${{" in value:
                    filled = render(value, secrets.lookup, resolved=used)
                    if "\r" in filled or "\n" in filled:
                        raise _Refused(f"secret in header {name!r} holds a line break")
                    self.headers[name] = filled
        except MissingSecret as exc:
            raise _Refused(str(exc)) from exc
        except SecretsFileError as exc:
            raise _Refused(str(exc)) from exc

    def pin(self, address: IPAddress) -> None:
        """Connect to ``address``; the URL's host stays the Host header and the TLS name."""
        self.headers["Host"] = self.url.netloc.decode("ascii")
        if self.url.scheme == "https":
            self.extensions["sni_hostname"] = self.host
        self.url = self.url.copy_with(host=str(address))


def _quote(value: str) -> str:
    return quote(value, safe="")
