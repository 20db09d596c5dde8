"""Turning a submit request into a new Execution: pure rules, shared by every transport.

The fingerprint is what decides "same request" for an idempotency key. It is taken over the
request *as the client sent it* (an absent ``executeAt`` stays absent rather than becoming
"now"), so a client that retries an identical request after a timeout is recognised."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

from tickwheel.domain.concurrency import Concurrency, ConcurrencySpec, evaluate
from tickwheel.domain.definition_refs import URI_RULE, name_of, versioned
from tickwheel.domain.definitions import Definition, validate_values
from tickwheel.domain.errors import ErrorList, FieldError, InvalidInput
from tickwheel.domain.fast_init import fillable, filled
from tickwheel.domain.ids import uuid7
from tickwheel.domain.jsonvalues import VERSION_MAX, problems
from tickwheel.domain.sharding import bucket_start, shard_id
from tickwheel.domain.states import ExecutionStatus

IDEMPOTENCY_KEY_MAX = 255
PRIORITY_MIN, PRIORITY_MAX = -100, 100


@dataclass(frozen=True)
class SubmitRequest:
    definition_uri: str
    inputs: dict[str, Any] = field(default_factory=dict)
    definition_version: int | None = None
    execute_at: datetime | None = None
    priority: int = 0
    idempotency_key: str | None = None
    start_by: datetime | None = None
    """Not started by then: it ends EXPIRED (docs/flow-control.md)."""
    deadline: datetime | None = None
    """No attempt starts after it; a retry that would is not made (FAILED)."""
    concurrency: ConcurrencySpec | None = None
    """Overrides the definition's ``concurrency`` for this execution (checked by its reader)."""
    trace_context: dict[str, str] | None = field(default=None, compare=False, repr=False)
    """A W3C trace context to store instead of the current span's (docs/tracing.md: a cron
    occurrence starts a trace of its own). In-process only: never sent over HTTP, never read
    from a request, and not part of the fingerprint."""


class SubmitOptions(TypedDict, total=False):
    """The optional fields of a submission that the SDK takes as keywords (``submit(...,
    priority=5)``), named as on ``SubmitRequest`` but for ``version`` (its
    ``definition_version``). Written once: both clients' ``submit`` and ``submit_after``, a
    Python job's ``submit`` and ``submit_request`` take them from here, so a new optional field
    of a submission is a line here beside its line on ``SubmitRequest``
    (``tests/unit/test_field_lists.py`` holds the two together)."""

    version: int | None
    priority: int
    start_by: datetime | None
    deadline: datetime | None
    concurrency: ConcurrencySpec | dict[str, Any] | None
    """As in a definition file (``{"key": "${{ inputs.x }}", "limit": 1, "order": "fifo"}``)."""


@dataclass(frozen=True)
class SubmitLimits:
    """How far from now ``executeAt`` may be: far past is almost always a client bug (wrong
    timezone, seconds vs milliseconds), far future an unbounded backlog."""

    max_past: timedelta = timedelta(days=7)
    max_future: timedelta = timedelta(days=400)


@dataclass(frozen=True)
class NewExecution:
    """A validated execution ready to insert. Its fields are the insert's columns, in the order
    of ``execution_insert``'s (``store/execution_columns.py``)."""

    execution_id: uuid.UUID
    tenant: str
    definition_uri: str
    definition_version: int
    inputs: dict[str, Any]
    execute_at: datetime
    bucket_start: datetime
    shard_id: int
    idempotency_key: str | None
    request_fingerprint: str
    status: ExecutionStatus
    priority: int
    max_attempts: int
    created_at: datetime
    trace_context: dict[str, str] | None = None
    """The submitter's W3C trace context (``traceparent``, ``tracestate``) when it submitted
    inside a span: set by the app layer, never part of the request or its fingerprint."""
    start_by: datetime | None = None
    deadline: datetime | None = None
    concurrency: Concurrency | None = None
    """The key evaluated at submit time, its limit and order (None: no limit)."""


def plain_request(request: SubmitRequest) -> bool:
    """Whether ``request`` gives nothing but its definition URI, version, priority and key, each
    of its plain type and within its bounds (the URI's form aside: read once per URI by whoever
    calls this). Most submissions have this shape, and all three that take a short way for it
    ask here: ``check_request_shape`` (nothing left to refuse but the URI), ``PlainRun.of`` and
    ``PlainRun.make`` (an item made from the run's first). One place, so that a new field of
    ``SubmitRequest`` is decided once (``tests/unit/test_plain_requests.py`` fails until it is)."""
    inputs = request.inputs
    if not (  # what most requests that are not plain give first: a batch's leave at once
        type(inputs) is dict
        and not inputs
        and request.execute_at is None
        and request.start_by is None
        and request.deadline is None
        and request.concurrency is None
        and request.trace_context is None
        and type(request.definition_uri) is str
    ):
        return False
    # Bounds as single comparisons in ``if``s, not chained: CPython specializes these for ints
    # (a batch asks once per item; chained, the predicate cost a batch's item ~2% more).
    priority, version, key = request.priority, request.definition_version, request.idempotency_key
    if type(priority) is not int or priority < PRIORITY_MIN or priority > PRIORITY_MAX:
        return False
    if version is not None and (type(version) is not int or version < 1 or version > VERSION_MAX):
        return False
    if key is None:
        return True
    return type(key) is str and 0 < len(key) <= IDEMPOTENCY_KEY_MAX and key.isprintable()


def check_request_shape(
    request: SubmitRequest,
    now: datetime,
    limits: SubmitLimits,
    uri: str | None = None,
    well_formed: str | None = None,
) -> None:
    """Checks that need no definition, so a bad request fails before touching the store.
    ``uri``: the definition's URI when the request names it otherwise (the SDK's bare name).
    ``well_formed``: a URI the caller already knows well formed (a batch's last one, or the one
    a single submission's name was just read from): a request naming it is not parsed again.
    Held by the caller, not here: nothing one request leaves behind decides another's check."""
    if uri is None:
        uri = request.definition_uri
    if uri == well_formed and plain_request(request):
        return  # the common shape, which none of the checks below refuses: no error list made
    errors = ErrorList()
    if (well_formed is None or uri != well_formed) and name_of(uri) is None:
        errors.add("definitionUri", URI_RULE)
    key, version = request.idempotency_key, request.definition_version
    if version is not None and not 1 <= version <= VERSION_MAX:
        errors.add("definitionVersion", f"must be a positive integer up to {VERSION_MAX}")
    if not PRIORITY_MIN <= request.priority <= PRIORITY_MAX:
        errors.add("priority", f"must be between {PRIORITY_MIN} and {PRIORITY_MAX}")
    if key is not None and not (0 < len(key) <= IDEMPOTENCY_KEY_MAX and key.isprintable()):
        errors.add("Idempotency-Key", f"must be 1 to {IDEMPOTENCY_KEY_MAX} printable characters")
    at = request.execute_at
    if at is not None:
        if at.tzinfo is None:
            errors.add("executeAt", "must carry a UTC offset (RFC 3339), e.g. 2026-01-01T09:00:00Z")
        elif at < now - limits.max_past:
            errors.add("executeAt", f"is more than {describe(limits.max_past)} in the past")
        elif at > now + limits.max_future:
            errors.add("executeAt", f"is more than {describe(limits.max_future)} in the future")
    if request.start_by is not None or request.deadline is not None:
        _check_limits(request, now, errors)
    # Checked here, before the definition: a batch refuses such an item alone, and the inputs
    # the definition does not declare must not reach a message or a row either.
    if not isinstance(request.inputs, dict):
        errors.add("inputs", "must be an object")
    elif request.inputs:  # (an empty object has no problem to find)
        for where, message in problems(request.inputs, "inputs"):
            errors.add(where, message)
    errors.raise_if_any("the execution request is invalid")


def _check_limits(request: SubmitRequest, now: datetime, errors: ErrorList) -> None:
    """``startBy`` and ``deadline``: aware instants that leave the execution a chance to start."""
    at = request.execute_at if request.execute_at and request.execute_at.tzinfo else now
    limits = {"startBy": request.start_by, "deadline": request.deadline}
    for name, value in limits.items():
        if value is None:
            continue
        if value.tzinfo is None:
            errors.add(name, "must carry a UTC offset (RFC 3339), e.g. 2026-01-01T09:00:00Z")
        elif value <= at:
            when = "executeAt" if request.execute_at else "now"
            errors.add(name, f"must be after {when} ({at.isoformat()}): it could never start")
    start_by, deadline = request.start_by, request.deadline
    if start_by and deadline and start_by.tzinfo and deadline.tzinfo and start_by > deadline:
        errors.add("startBy", "must not be after deadline: no attempt starts after the deadline")


def describe(span: timedelta) -> str:
    """A span in words people use for horizons: "400 days", "36 hours", "90 seconds"."""
    seconds = span.total_seconds()
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds:g} seconds"


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)
"""The fingerprint's JSON: ``json.dumps`` with these arguments, without an encoder per call. It
never changes: stored fingerprints decide whether a retried request is the same."""


_last_plain: tuple[str | None, int | None, int, str] = (None, None, 0, "")
"""The last fingerprint of a request without ``executeAt`` or inputs, with what it is of (its
URI, version and priority: strings and ints, compared by value)."""


def fingerprint(request: SubmitRequest, uri: str | None = None) -> str:
    """The SHA-256 of the request's canonical JSON (``fingerprint_reference``'s, to the byte).

    Every submission takes one, and building the body then sorting and encoding it through
    ``json`` cost a batch about a tenth of its CPU per item: the common shape (no ``startBy``,
    ``deadline`` or ``concurrency``, plain values) is written here directly, keys in their
    sorted order, each value encoded as ``json`` encodes it. Anything else takes the reference
    path (``tests/unit/test_submission_fingerprint.py`` holds the two equal). ``uri``: as
    ``check_request_shape``'s, taken for the request's ``definition_uri``."""
    global _last_plain
    version, priority, at = request.definition_version, request.priority, request.execute_at
    if uri is None:
        uri = request.definition_uri
    if (
        request.start_by is not None
        or request.deadline is not None
        or request.concurrency is not None
        or type(uri) is not str
        or type(priority) is not int
        or (version is not None and type(version) is not int)
    ):
        return fingerprint_reference(request, uri)
    inputs = request.inputs
    plain = at is None and type(inputs) is dict and not inputs
    if plain:  # the batch's requests most often differ by their keys alone: the last one kept
        last = _last_plain
        if last[0] == uri and last[1] == version and last[2] == priority:
            return last[3]
    text = (
        '{"definitionUri":'
        + _encode_string(uri)
        + ',"definitionVersion":'
        + ("null" if version is None else int.__repr__(version))
        + ',"executeAt":'
        + ("null" if at is None else _encode_string(at.astimezone(UTC).isoformat()))
        + ',"inputs":'
        + ("{}" if type(inputs) is dict and not inputs else _CANONICAL.encode(inputs))
        + ',"priority":'
        + int.__repr__(priority)
        + "}"
    )
    digest = hashlib.sha256(text.encode()).hexdigest()
    if plain:
        _last_plain = (uri, version, priority, digest)
    return digest


_encode_string = json.encoder.encode_basestring_ascii
"""How ``json`` (``ensure_ascii``, the default) writes a string."""


def fingerprint_reference(request: SubmitRequest, uri: str | None = None) -> str:
    """The fingerprint as it was first defined: the request's fields in a dictionary, encoded
    by ``_CANONICAL``. ``fingerprint`` takes it for every shape it does not write itself."""
    body = {
        "definitionUri": request.definition_uri if uri is None else uri,
        "definitionVersion": request.definition_version,
        "inputs": request.inputs,
        # The same instant written with another offset is the same request.
        "executeAt": request.execute_at.astimezone(UTC).isoformat() if request.execute_at else None,
        "priority": request.priority,
    }
    # Only when set, so that every request without them keeps its fingerprint.
    if request.start_by is not None:
        body["startBy"] = request.start_by.astimezone(UTC).isoformat()
    if request.deadline is not None:
        body["deadline"] = request.deadline.astimezone(UTC).isoformat()
    # Only when given: requests without it keep the fingerprint they had before the field.
    if request.concurrency is not None:
        body["concurrency"] = request.concurrency.to_document()
    return hashlib.sha256(_CANONICAL.encode(body).encode()).hexdigest()


def prepare_execution(
    request: SubmitRequest,
    definition: Definition,
    tenant: str,
    now: datetime,
    trace_context: dict[str, str] | None = None,
    uri: str | None = None,
    made: tuple[uuid.UUID, int] | None = None,
) -> NewExecution:
    """Validates the inputs against the pinned definition and fixes everything decided at insert:
    id, shard, bucket, and whether the execution is already due (then it starts READY and the
    scheduler never has to touch it). ``trace_context``: the submitter's, stored as it is (not
    part of the request, so not of its fingerprint either). ``uri``: as
    ``check_request_shape``'s. ``made``: the item's id and its shard, made beforehand with
    the batch's (``batch_items.ids_and_shards``); otherwise a new ``uuid7(now)``."""
    if type(request.inputs) is dict and not request.inputs and not definition.inputs:
        inputs: dict[str, Any] = {}  # what validate_values gives: nothing declared, none given
    else:
        inputs = validate_values(
            definition.inputs,
            request.inputs,
            "inputs",
            context=versioned(definition.uri, definition.version),
        )
    execute_at = request.execute_at or now
    spec = request.concurrency or definition.concurrency
    concurrency = None
    if spec is not None:
        try:
            concurrency = evaluate(spec, inputs)
        except ValueError as exc:
            where = "concurrency.key" if request.concurrency else "definition concurrency.key"
            raise InvalidInput(
                "the execution request is invalid", [FieldError(where, str(exc))]
            ) from None
    if made is None:
        execution_id = uuid7(now)
        shard = shard_id(execution_id)
    else:
        execution_id, shard = made
    due = execute_at <= now
    return _new_execution(
        {
            "execution_id": execution_id,
            "tenant": tenant,
            "definition_uri": definition.uri,
            "definition_version": definition.version,
            "inputs": inputs,
            "execute_at": execute_at,
            "bucket_start": _bucket_of(execute_at),
            "shard_id": shard,
            "idempotency_key": request.idempotency_key,
            "request_fingerprint": fingerprint(request, uri),
            "status": ExecutionStatus.READY if due else ExecutionStatus.SCHEDULED,
            "priority": request.priority,
            "max_attempts": definition.retry.max_attempts,
            "created_at": now,
            "trace_context": trace_context,
            "start_by": request.start_by or _after(execute_at, definition.start_within),
            "deadline": request.deadline or _after(execute_at, definition.deadline_within),
            "concurrency": concurrency,
        }
    )


def _new_execution(fields: dict[str, Any]) -> NewExecution:
    """``NewExecution(**fields)`` for every one of its fields: the frozen dataclass's
    ``__init__`` sets them one ``object.__setattr__`` at a time, a third of what preparing an
    item cost. Its instance dictionary is filled in one step instead: what ``__init__`` leaves,
    as long as the class keeps a ``__dict__`` and has no ``__post_init__`` (checked below), and
    every field is given (``tests/unit/test_submit_fast_paths.py``)."""
    return filled(NewExecution, fields)


fillable(NewExecution)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MINUTE = timedelta(minutes=1)
_last_bucket = (_EPOCH, _EPOCH, _EPOCH)  # (an instant, its bucket, the bucket's end)


def _bucket_of(at: datetime) -> datetime:
    """``bucket_start(at)``, the last answer kept: a batch's items are mostly due at the same
    instant object (the batch's ``now``), and single submissions made one after another at
    instants (in UTC, as the clock gives them) within the same minute. The instant is compared
    by identity, or by value within the kept bucket when it is in UTC (the minute it starts
    with is then its bucket). The object kept stays alive, so its identity cannot be taken by
    another meanwhile."""
    global _last_bucket
    last = _last_bucket
    if last[0] is at or (at.tzinfo is UTC and last[1] <= at < last[2]):
        return last[1]
    bucket = bucket_start(at)
    _last_bucket = (at, bucket, bucket + _MINUTE)
    return bucket


def _after(at: datetime, seconds: float | None) -> datetime | None:
    """A definition's default limit for this execution (none: None)."""
    return None if seconds is None else at + timedelta(seconds=seconds)
