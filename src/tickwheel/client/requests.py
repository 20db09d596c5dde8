"""What the SDK builds before it sends: where to, the definition's URI, the submit request."""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Iterable
from datetime import datetime
from operator import attrgetter
from pathlib import Path
from typing import Any, Unpack

from tickwheel.domain.concurrency import ConcurrencySpec, spec_of
from tickwheel.domain.definition_refs import to_uri
from tickwheel.domain.fast_init import fillable, filled
from tickwheel.domain.submission import SubmitOptions, SubmitRequest

ExecutionRef = uuid.UUID | str
ConcurrencyArg = ConcurrencySpec | dict[str, Any] | None
"""A submission's ``concurrency``: ``{"key": "${{ inputs.x }}", "limit": 1, "order": "fifo"}``."""
DEFAULT_URL = "http://127.0.0.1:8000"


def connection_settings(url: str | None, api_key: str | None) -> tuple[str, str | None]:
    """Where to send requests and with which key: the arguments given, else ``TICKWHEEL_URL``
    and ``TICKWHEEL_API_KEY`` (the variables the CLI and the README's tour use), else the local
    server and no key. An argument given explicitly always wins, ``api_key=""`` included (no
    key, whatever the environment says)."""
    resolved_url = url or os.environ.get("TICKWHEEL_URL") or DEFAULT_URL
    if api_key is None:
        api_key = os.environ.get("TICKWHEEL_API_KEY") or None
    return resolved_url, api_key or None


def definition_uri(definition: str) -> str:
    """Accepts ``registry://jobs/<name>`` or the bare name."""
    return to_uri(definition)


def submit_request(
    definition: str,
    inputs: dict[str, Any] | None,
    execute_at: datetime | None,
    idempotency_key: str | None,
    **options: Unpack[SubmitOptions],
) -> SubmitRequest:
    """The request of ``submit(...)``: each option goes to the ``SubmitRequest`` field of its
    name (``version`` to ``definition_version``); one not given keeps that field's default."""
    if not options:  # the common call: what ``SubmitRequest(...)`` makes of the four, filled
        given = _DEFAULTS.copy()
        given["definition_uri"] = definition_uri(definition)
        given["inputs"] = inputs or {}
        given["execute_at"] = execute_at
        given["idempotency_key"] = idempotency_key
        return filled(SubmitRequest, given)
    fields: dict[str, Any] = {k: v for k, v in options.items() if k != "version"}
    if "concurrency" in fields:  # a mapping as in a definition file, or a ConcurrencySpec
        fields["concurrency"] = spec_of(fields["concurrency"])
    return SubmitRequest(
        definition_uri=definition_uri(definition),
        inputs=inputs or {},
        definition_version=options.get("version"),
        execute_at=execute_at,
        idempotency_key=idempotency_key,
        **fields,
    )


def as_id(ref: ExecutionRef) -> uuid.UUID:
    return ref if isinstance(ref, uuid.UUID) else uuid.UUID(ref)


def with_uris(requests: Iterable[SubmitRequest]) -> list[SubmitRequest]:
    """The requests with each definition named by its URI (a bare name is accepted)."""
    out = []
    for r in requests:
        uri = definition_uri(r.definition_uri)
        # Frozen: a request already naming its URI is used as it is, not copied.
        out.append(r if uri == r.definition_uri else _renamed(r, uri))
    return out


def _renamed(request: SubmitRequest, uri: str) -> SubmitRequest:
    """``dataclasses.replace(request, definition_uri=uri)`` in a fraction of its time (a batch of
    bare names pays it per item): each field set as ``__init__`` sets it, the name replaced.
    What ``replace`` adds is ``__init__`` and ``__post_init__``, and a ``SubmitRequest`` has no
    ``__post_init__`` (checked below). Not through the instance dictionaries: reading a
    request's ``__dict__`` makes one for it (Python keeps an instance's attributes without one
    until asked), and writing the copy's made a second, two objects more per item of a batch
    that outlive it and that the garbage collector then walks (over 60 batches of 1,000:
    client CPU per item 29-30 against 31.5 µs, full collections 13 against 14)."""
    renamed: SubmitRequest = _new(SubmitRequest)
    for name, value in zip(_FIELDS, _values(request), strict=True):
        _set(renamed, name, uri if name == "definition_uri" else value)
    return renamed


_FIELDS = tuple(f.name for f in dataclasses.fields(SubmitRequest))
_values = attrgetter(*_FIELDS)
_new = object.__new__
_set = object.__setattr__

fillable(SubmitRequest)
_DEFAULTS: dict[str, Any] = {
    f.name: None if f.default is dataclasses.MISSING else f.default
    for f in dataclasses.fields(SubmitRequest)
}
"""Each ``SubmitRequest`` field's default, in the fields' order (``__init__``'s); ``inputs``
(a new dictionary each time) and ``definition_uri`` (no default) are always given."""


def document_source(
    source: str | Path | bytes, fmt: str | None, what: str, formats: str
) -> tuple[bytes, str]:
    """A definition document's bytes and format: a path (``str`` without ``fmt``, or ``Path``),
    whose name tells the format unless ``fmt`` does, or the content itself with ``fmt``."""
    if isinstance(source, Path) or (isinstance(source, str) and fmt is None):
        # The definition files' module parses them too (yaml, defusedxml): loaded for a file.
        from tickwheel.domain.definition_files import format_from_filename

        path = Path(source)
        body, fmt = path.read_bytes(), fmt or format_from_filename(path.name)
    else:
        body = source.encode() if isinstance(source, str) else source
    if fmt is None:
        raise ValueError(f"say which format the {what} content is in: {formats}")
    return body, fmt
