"""Failure notifications: which events a tenant may subscribe to, what a subscription and a
delivery are, how a delivery is signed, and which URLs a subscription may name.

Pure: no I/O, no DNS. The URL rules are the http runner's (``domain/addresses.py`` and the
operator's ``RunPolicy``): a webhook could otherwise make the server call a loopback, private
or cloud-metadata address on a tenant's behalf. The sender checks the resolved addresses again
before each request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from tickwheel.domain.addresses import denied_reason, ip_from_host, is_localhost_name
from tickwheel.domain.errors import FieldError, InvalidInput
from tickwheel.domain.run_policy import RunPolicy, host_is_allowed
from tickwheel.domain.webhook_events import WebhookEvent as WebhookEvent  # re-exported

if TYPE_CHECKING:
    # The cron domain (its parsers, cronsim) is the Cron Service's: a webhook sender beside a
    # scheduler never needs it.
    from tickwheel.domain.cron_jobs import Outcome

SIGNATURE_HEADER: Final = "Tickwheel-Signature"
DELIVERY_HEADER: Final = "Tickwheel-Delivery"
EVENT_HEADER: Final = "Tickwheel-Event"
URL_MAX: Final = 2048
MAX_ATTEMPTS: Final = 8
"""Tries of one delivery before it is FAILED for good (about 30 minutes of back-off)."""


class DeliveryStatus(StrEnum):
    PENDING = "PENDING"
    DELIVERED = "DELIVERED"
    FAILED = "FAILED"


@dataclass(frozen=True)
class WebhookSubscription:
    webhook_id: uuid.UUID
    tenant: str
    url: str
    events: tuple[WebhookEvent, ...]
    secret: str
    created_at: datetime
    description: str = ""


@dataclass(frozen=True)
class WebhookDelivery:
    delivery_id: uuid.UUID
    webhook_id: uuid.UUID
    tenant: str
    event: WebhookEvent
    payload: dict[str, Any]
    status: DeliveryStatus
    attempts: int
    next_attempt_at: datetime | None
    response_code: int | None
    last_error: str | None
    created_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True)
class DeliveryJob:
    """A claimed delivery with what sending it needs."""

    delivery: WebhookDelivery
    url: str
    secret: str


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def mask_secret(secret: str) -> str:
    """What a listing shows: enough to tell two secrets apart, never enough to sign."""
    return f"whsec_…{secret[-4:]}"


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The ``Tickwheel-Signature`` value: HMAC-SHA256 over ``"<timestamp>." + body``. The
    timestamp is signed too, so a receiver that refuses old timestamps refuses replays."""
    message = str(timestamp).encode("ascii") + b"." + body
    digest = hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify(secret: str, header: str, body: bytes, now: int, tolerance: int = 300) -> bool:
    """What a receiver does (docs/webhooks.md shows the same in a few lines)."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > tolerance:
        return False
    expected = sign(secret, timestamp, body).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))


def parse_events(values: list[str]) -> tuple[WebhookEvent, ...]:
    if not values:
        raise _invalid("events", "name at least one event")
    known = {e.value: e for e in WebhookEvent}
    unknown = [v for v in values if v not in known]
    if unknown:
        choices = ", ".join(known)
        raise _invalid("events", f"unknown event {unknown[0]!r} (one of {choices})")
    return tuple(dict.fromkeys(known[v] for v in values))


def url_problem(url: str, policy: RunPolicy) -> str | None:
    """Why ``url`` may not be a webhook's destination, or None. A host written as an address
    (or ``localhost``) is judged here; a name is judged by the sender once resolved."""
    if len(url) > URL_MAX:
        return f"url: longer than {URL_MAX} characters"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"url: scheme {parts.scheme!r}: only http and https"
    if parts.username is not None or parts.password is not None:
        return "url: holds credentials (user:password@): verify the signature instead"
    host = parts.hostname or ""
    if not host:
        return "url: has no host"
    ip = ip_from_host("127.0.0.1") if is_localhost_name(host) else ip_from_host(host)
    why = None if ip is None else denied_reason(ip, policy.http_allow_networks)
    if why and not host_is_allowed(host, policy):
        return (
            f"url: host {host!r} is {why}, which webhooks do not call unless the operator"
            " allows it (TICKWHEEL_HTTP_ALLOW_NETWORKS / TICKWHEEL_HTTP_ALLOW_HOSTS)"
        )
    return None


def check_url(url: str, policy: RunPolicy) -> str:
    if problem := url_problem(url, policy):
        raise _invalid("url", problem.removeprefix("url: "))
    return url


def _invalid(path: str, message: str) -> InvalidInput:
    return InvalidInput(f"{path}: {message}", [FieldError(path, message)])


def cron_webhook_event(outcome: Outcome) -> WebhookEvent | None:
    """The event a cron occurrence's outcome raises: a missed one (found past its misfire
    grace) or a failed one (its submission refused); the others are not failures."""
    from tickwheel.domain.cron_jobs import Outcome  # loaded already by whoever has an outcome

    if outcome is Outcome.SKIPPED_MISFIRE:
        return WebhookEvent.CRON_MISSED
    if outcome is Outcome.FAILED:
        return WebhookEvent.CRON_FAILED
    return None
