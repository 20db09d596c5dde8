"""Without authentication (``--insecure-no-auth``) the API answers only requests addressed to a
loopback name. Binding to 127.0.0.1 is not enough on its own: a web page on another site can
point its own DNS name at 127.0.0.1 (DNS rebinding), and the browser then sends that page's
requests, with the page's name in ``Host``, to this server as if they were same-origin. Such a
request carries the attacker's name in ``Host``; checking it against the loopback names leaves
the browser no way in. With keys required the check is unnecessary: a page cannot read them."""

from __future__ import annotations

import ipaddress

from starlette.types import ASGIApp, Receive, Scope, Send

from tickwheel.api.errors import error_response

LOOPBACK_NAMES = ("localhost",)


def loopback_host(header: str) -> bool:
    """Whether a ``Host`` value (with or without a port) names this machine: ``localhost``, a
    127.x.y.z address or ``[::1]``. Names that merely resolve to loopback do not count."""
    host, port = _split(header.strip())
    if host is None or (port and not port.isdigit()):
        return False
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _split(header: str) -> tuple[str | None, str]:
    if header.startswith("["):  # an IPv6 literal: [::1] or [::1]:8000
        inside, bracket, rest = header[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None, ""
        return inside, rest[1:]
    host, _, port = header.partition(":")
    return (host or None), port


class LoopbackHostOnly:
    """Pure ASGI middleware: a request whose ``Host`` is not a loopback name gets 421."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = dict(scope.get("headers") or [])
            host = headers.get(b"host", b"").decode("latin-1")
            if not loopback_host(host):
                if scope["type"] == "websocket":  # closing before accepting is a 403
                    await send({"type": "websocket.close", "code": 1008})
                    return
                response = error_response(
                    421,
                    "misdirected_request",
                    "this server runs without authentication (--insecure-no-auth) and answers "
                    "only requests addressed to localhost, 127.0.0.1 or [::1]; "
                    f"Host {host[:100]!r} is refused",
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
