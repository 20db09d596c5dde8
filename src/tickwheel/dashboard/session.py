"""Dashboard sessions: a signed cookie instead of an ``Authorization`` header.

A browser cannot be trusted to keep an API key in page script, so sign-in checks the key once
(``api.auth.authenticate``, the API's own rule) and the cookie keeps only the key's SHA-256 hash,
signed with HMAC. Every request looks that hash up again, so a revoked key ends its sessions at
once. The cookie is HttpOnly (page script never sees it) and SameSite=Strict (other sites'
pages cannot make the browser send it); each session also carries a random CSRF token that every
POST must echo in its form, which stops a forged form even where SameSite is not honoured."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import Response

from tickwheel.api.auth import Principal, authenticate, hash_key
from tickwheel.api.deps import app_state
from tickwheel.domain.models import Scope

COOKIE = "tw_session"
SIGNIN_COOKIE = "tw_signin"
MAX_AGE = 12 * 3600


class SignedOut(Exception):
    """No valid session: pages redirect to the sign-in page, the SSE stream answers 401."""


class CsrfRejected(Exception):
    """A POST without the session's CSRF token."""


@dataclass(frozen=True)
class Session:
    principal: Principal
    csrf: str


class Signer:
    """HMAC-SHA256 over the cookie's JSON. The secret comes from settings (so several API
    processes behind one address accept each other's cookies) or is random per process."""

    def __init__(self, secret: str | None) -> None:
        self._key = (secret or secrets.token_urlsafe(32)).encode()

    def _mac(self, payload: bytes) -> str:
        digest = hmac.new(self._key, payload, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def dumps(self, data: dict[str, object]) -> str:
        payload = base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")
        return f"{payload}.{self._mac(payload.encode())}"

    def loads(self, value: str) -> dict[str, object] | None:
        payload, _, mac = value.partition(".")
        if not mac or not hmac.compare_digest(mac, self._mac(payload.encode())):
            return None
        try:
            raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
            data = json.loads(raw)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None


def signer(request: Request) -> Signer:
    found: Signer = request.app.state.dashboard_signer
    return found


def set_cookie(response: Response, name: str, value: str, request: Request, max_age: int) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


async def sign_in(request: Request, api_key: str, response: Response) -> None:
    """Checks the key like the API does and starts a session; raises ``Unauthorized``."""
    state = app_state(request)
    if not state.auth_disabled:
        await authenticate(state.store, f"Bearer {api_key}")
    data = {
        "h": "" if state.auth_disabled else hash_key(api_key.strip()),
        "c": secrets.token_urlsafe(24),
        "t": int(time.time()),
    }
    set_cookie(response, COOKIE, signer(request).dumps(data), request, MAX_AGE)


async def current(request: Request) -> Session:
    """The request's session, re-checked against the store; raises ``SignedOut``."""
    raw = request.cookies.get(COOKIE)
    data = signer(request).loads(raw) if raw else None
    if data is None or not isinstance(data.get("t"), int) or not isinstance(data.get("c"), str):
        raise SignedOut
    issued = data["t"]
    assert isinstance(issued, int)
    if time.time() - issued > MAX_AGE:
        raise SignedOut
    state = app_state(request)
    csrf = str(data["c"])
    if state.auth_disabled:
        return Session(Principal(state.default_tenant, Scope.ADMIN, None), csrf)
    key = await state.store.api_key_by_hash(str(data.get("h", "")))
    if key is None:
        raise SignedOut
    return Session(Principal(key.tenant, key.scope, key.key_id), csrf)


def check_csrf(session: Session, form: dict[str, str]) -> None:
    if not hmac.compare_digest(form.get("csrf", ""), session.csrf):
        raise CsrfRejected


def signin_token(request: Request) -> str:
    """Double-submit token for the sign-in form (there is no session yet to hold one): the
    same random value in a cookie and in the form, compared on POST."""
    return request.cookies.get(SIGNIN_COOKIE) or secrets.token_urlsafe(24)


def check_signin_token(request: Request, form: dict[str, str]) -> None:
    cookie = request.cookies.get(SIGNIN_COOKIE, "")
    if not cookie or not hmac.compare_digest(form.get("csrf", ""), cookie):
        raise CsrfRejected
