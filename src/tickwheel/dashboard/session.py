"""Dashboard sessions: a cookie instead of an ``Authorization`` header.

A browser cannot be trusted to keep an API key in page script, so sign-in checks the key once
(``api.auth.authenticate``, the API's own rule) and starts a session: a random token in the
cookie, its SHA-256 in the database (``dashboard_sessions``) with the key that signed in and an
expiry. Every request looks the session up with its key, so signing out (the row deleted) ends
that session on every API process at once, and revoking the key ends all of its sessions; other
sessions, of the same key or not, go on. The cookie is HMAC-signed, HttpOnly (page script never
sees it) and SameSite=Strict (other sites' pages cannot make the browser send it); each session
also carries a random CSRF token that every POST must echo in its form, which stops a forged
form even where SameSite is not honoured."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from datetime import timedelta

from fastapi import Request
from fastapi.responses import Response

from tickwheel.api.auth import Principal, authenticate
from tickwheel.api.deps import app_state
from tickwheel.domain.models import Scope
from tickwheel.store.session_protocol import SessionStore

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
    session_hash: str


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


def sessions(request: Request) -> SessionStore:
    found: SessionStore = request.app.state.dashboard_sessions
    return found


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def sign_in(request: Request, api_key: str, response: Response) -> None:
    """Checks the key like the API does and starts a session; raises ``Unauthorized``."""
    state = app_state(request)
    key_id = None
    if not state.auth_disabled:
        key_id = (await authenticate(state.store, f"Bearer {api_key}")).key_id
    token = secrets.token_urlsafe(32)
    now = state.clock.now()
    store = sessions(request)
    await store.dashboard_session_prune(now)  # the expiry index keeps this cheap
    await store.dashboard_session_insert(
        _hash(token), key_id, now, now + timedelta(seconds=MAX_AGE)
    )
    data: dict[str, object] = {"s": token, "c": secrets.token_urlsafe(24)}
    set_cookie(response, COOKIE, signer(request).dumps(data), request, MAX_AGE)


async def sign_out(request: Request, session: Session) -> None:
    """Ends this session only, on every API process."""
    await sessions(request).dashboard_session_delete(session.session_hash)


async def current(request: Request) -> Session:
    """The request's session, re-checked against the store; raises ``SignedOut``."""
    raw = request.cookies.get(COOKIE)
    data = signer(request).loads(raw) if raw else None
    if data is None or not isinstance(data.get("s"), str) or not isinstance(data.get("c"), str):
        raise SignedOut
    state = app_state(request)
    session_hash = _hash(str(data["s"]))
    csrf = str(data["c"])
    found = await sessions(request).dashboard_session_get(session_hash, state.clock.now())
    if found is None:
        raise SignedOut
    if found.key is None:
        # Made without keys (--insecure-no-auth): worth nothing once the server requires keys.
        if not state.auth_disabled:
            raise SignedOut
        return Session(Principal(state.default_tenant, Scope.ADMIN, None), csrf, session_hash)
    key = found.key
    return Session(Principal(key.tenant, key.scope, key.key_id), csrf, session_hash)


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
