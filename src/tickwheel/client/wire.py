"""The API's answers made from the store's records. The JSON shape of each is its resource model
(``tickwheel.resources``), which the server renders and the HTTP transport reads back; here
only which record field goes where, credentials masked, and the cursors."""

from __future__ import annotations

import base64
import uuid
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tickwheel.domain.definitions import definition_to_document
from tickwheel.domain.errors import BadRequest
from tickwheel.domain.models import Attempt, Execution, ExecutionEvent
from tickwheel.domain.secret_refs import has_literal_credential, is_sensitive_name
from tickwheel.resources import executions as resources
from tickwheel.resources.base import iso as iso  # re-exported: cron_wire and the CLI use it
from tickwheel.resources.definitions import Definition
from tickwheel.store.protocol import StoredDefinition


def execution_to_wire(e: Execution) -> dict[str, Any]:
    return resources.execution_wire(e)


def attempt_to_wire(a: Attempt) -> dict[str, Any]:
    return resources.Attempt.of(a).to_wire()


def event_to_wire(ev: ExecutionEvent) -> dict[str, Any]:
    return resources.HistoryEvent.of(ev).to_wire()


def definition_to_wire(stored: StoredDefinition) -> dict[str, Any]:
    d = stored.definition
    document = _without_credentials(definition_to_document(d))
    return Definition.model_validate(
        {
            "uri": d.uri,
            **document,
            "contentHash": stored.content_hash,
            "createdAt": stored.created_at,
            # Whose it is: the caller's own tenant, or the operator's shared registry (owner null).
            "owner": stored.owner or None,
            "shared": stored.owner == "",
        }
    ).to_wire()


HIDDEN = "***hidden: a credential stored before references were required***"


def _without_credentials(document: dict[str, Any]) -> dict[str, Any]:
    """A definition as the API shows it: a literal credential that a definition registered before
    secret references were required still holds (a sensitive header's value, a password in the
    URL) is never returned. Registration refuses such values now; the worker refuses to run them."""
    execution = document.get("execution")
    if not isinstance(execution, dict) or execution.get("type") != "http":
        return document
    shown = dict(execution)
    headers = shown.get("headers") or {}
    shown["headers"] = {
        name: HIDDEN if is_sensitive_name(name) and has_literal_credential(value) else value
        for name, value in headers.items()
    }
    shown["url"] = _url_without_credentials(str(shown.get("url", "")))
    return {**document, "execution": shown}


def _url_without_credentials(text: str) -> str:
    """``text`` with a password and literal values of sensitive query parameters masked."""
    url = urlsplit(text)
    pairs = parse_qsl(url.query, keep_blank_values=True)
    leaks = [is_sensitive_name(k) and has_literal_credential(v) for k, v in pairs]
    if url.password is None and not any(leaks):
        return text  # unchanged, byte for byte
    netloc = url.netloc
    if url.password is not None:
        netloc = f"{url.username}:***@" + netloc.rpartition("@")[2]
    query = urlencode(
        [(k, "***" if leak else v) for (k, v), leak in zip(pairs, leaks, strict=True)]
    )
    return urlunsplit((url.scheme, netloc, url.path, query, url.fragment))


BAD_CURSOR = "the cursor is not one this API returned; start again without it"


def encode_cursor(execution_id: uuid.UUID) -> str:
    return cursor_from_bytes(execution_id.bytes)


def decode_cursor(cursor: str) -> uuid.UUID:
    raw = cursor_bytes(cursor)
    if len(raw) != 16:
        raise BadRequest(BAD_CURSOR, {"cursor": cursor[:100]})
    return uuid.UUID(bytes=raw)


def cursor_from_bytes(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def cursor_bytes(cursor: str) -> bytes:
    """The bytes of a cursor this API made; BadRequest (400) for anything else, so that a
    mangled cursor is said to be wrong rather than quietly read as the first page."""
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
    except (ValueError, UnicodeEncodeError):
        raw = None
    # Only the one spelling this API writes: stray bits or padding mean it was not ours.
    if not raw or cursor_from_bytes(raw) != cursor:
        raise BadRequest(BAD_CURSOR, {"cursor": cursor[:100]})
    return raw
