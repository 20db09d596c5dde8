"""Job Definitions: the model, the one place that checks a document, and its canonical form.

A *document* is a mapping with the camelCase keys of a Job Definition File; the front-ends in
``tickwheel.domain.definition_files`` turn YAML, JSON and XML text into one.
``definition_from_document`` is the one place that checks a document and builds the model,
naming every bad field by its dotted path. ``definition_to_document`` is the canonical form
that ``content_hash`` and ``diff_definitions`` compare. The execution block (how a job runs,
its checks and canonical form) is in ``definition_executions``; its types are re-exported here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from tickwheel.domain.breaker import (
    BreakerConfig,
    breaker_to_document,
    duration_seconds,
    read_breaker,
)
from tickwheel.domain.concurrency import ConcurrencySpec, read_concurrency
from tickwheel.domain.definition_executions import (
    ISOLATIONS,
    CommandExecution,
    ContainerExecution,
    Execution,
    HttpExecution,
    PythonExecution,
    execution_to_document,
    read_execution,
)
from tickwheel.domain.definition_refs import NAME, uri_of
from tickwheel.domain.errors import ErrorList, InvalidInput
from tickwheel.domain.fieldtypes import (
    FieldSpec,
    FieldType,
    check_keys,
    describe,
    field_to_document,
    join,
    json_type_name,
    parse_fields,
    quote,
    read_positive_int,
    read_seconds,
    read_str,
    validate_values,
)
from tickwheel.domain.rate_limits import RateLimitSpec, read_rate_limit

__all__ = [
    "ISOLATIONS",
    "MAX_LOST_ATTEMPTS",
    "PERMANENT_KINDS",
    "RETRYABLE_KINDS",
    "CommandExecution",
    "ContainerExecution",
    "Definition",
    "Execution",
    "FieldSpec",
    "FieldType",
    "HttpExecution",
    "PythonExecution",
    "RetryPolicy",
    "content_hash",
    "definition_from_document",
    "definition_to_document",
    "diff_definitions",
    "is_retryable",
    "validate_values",
]

RETRYABLE_KINDS: Final = frozenset({"error", "timeout", "lost", "server_error"})
PERMANENT_KINDS: Final = frozenset(
    {"permanent", "invalid_output", "client_error", "missing_runtime"}
)
_TOP_KEYS = (
    "name",
    "version",
    "description",
    "inputs",
    "outputs",
    "execution",
    "timeout",
    "retry",
    "circuitBreaker",
    "startBy",
    "deadline",
    "concurrency",
    "rateLimit",
)
_RETRY_KEYS = ("maxAttempts", "baseDelay", "maxDelay", "retryOn", "maxLostAttempts")
MAX_LOST_ATTEMPTS: Final = 5
"""The default of ``retry.maxLostAttempts``: attempts lost to a worker's death (its lease ran out)
before the execution is dead-lettered anyway: a job that kills its worker every time still ends."""


@dataclass(frozen=True)
class RetryPolicy:
    """Which failures are retried, how often, and the bounds of the backoff between attempts."""

    max_attempts: int = 3
    base_delay: float = 1.0
    max_delay: float = 300.0
    retry_on: frozenset[str] = RETRYABLE_KINDS
    max_lost_attempts: int = MAX_LOST_ATTEMPTS
    """Attempts lost to worker deaths are counted apart from ``max_attempts`` (a neighbour's
    crash must not use up a healthy execution's budget), under this cap of their own."""


def is_retryable(policy: RetryPolicy, kind: str) -> bool:
    """Whether a failure of ``kind`` may be retried; permanent and unknown kinds never are."""
    return kind in RETRYABLE_KINDS and kind in policy.retry_on


@dataclass(frozen=True, kw_only=True)
class Definition:
    """A versioned Job Definition; immutable once built (inputs and outputs are read-only)."""

    name: str
    version: int
    description: str = ""
    inputs: Mapping[str, FieldSpec] = field(default_factory=dict)
    outputs: Mapping[str, FieldSpec] = field(default_factory=dict)
    execution: Execution
    timeout: float = 300.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    circuit_breaker: BreakerConfig | None = None
    """Pauses the definition (per tenant) while its attempts keep failing (domain/breaker.py)."""
    start_within: float | None = None
    """``startBy`` of a submission that names none: this many seconds after its executeAt."""
    deadline_within: float | None = None
    """``deadline`` of a submission that names none: this many seconds after its executeAt."""
    concurrency: ConcurrencySpec | None = None
    """How many of its executions may run at once, per key (domain/concurrency.py)."""
    rate_limit: RateLimitSpec | None = None
    """How many of its executions may start per period, per tenant (domain/rate_limits.py)."""

    def __post_init__(self) -> None:
        # Own copies, read-only by type (Mapping); plain dicts so that definitions pickle and copy.
        object.__setattr__(self, "inputs", dict(self.inputs))
        object.__setattr__(self, "outputs", dict(self.outputs))

    @property
    def uri(self) -> str:
        return uri_of(self.name)


# -- checking: document -> model -----------------------------------------------------------------


def definition_from_document(
    doc: Mapping[str, Any], *, errors: ErrorList | None = None
) -> Definition:
    """Check a document (what YAML and JSON parse into) and build its Definition.

    ``errors`` holds problems already found while reading the text (the XML conversion finds
    some); they are reported together with the document's own. Raises InvalidInput, naming
    every bad field by its dotted path.
    """
    return _build(doc, ErrorList() if errors is None else errors)


def _build(doc: Any, errors: ErrorList) -> Definition:
    if not isinstance(doc, Mapping):
        errors.add(
            "", f"a definition must be a mapping at the top level, got {json_type_name(doc)}"
        )
        raise InvalidInput("invalid definition", errors.items)
    check_keys(doc, _TOP_KEYS, "", errors)
    name = _read_name(doc.get("name"), errors)
    version = read_positive_int(doc.get("version"), "version", errors, None)
    description = doc.get("description")
    if description is None:
        description = ""
    elif not isinstance(description, str):
        errors.add("description", f"must be a string, got {describe(description)}")
    inputs = parse_fields(doc.get("inputs"), "inputs", errors)
    outputs = parse_fields(doc.get("outputs"), "outputs", errors)
    execution = read_execution(doc.get("execution"), errors)
    timeout = read_seconds(doc.get("timeout"), "timeout", errors, 300.0)
    retry = _read_retry(doc.get("retry"), errors)
    breaker = read_breaker(doc.get("circuitBreaker"), errors)
    start_within = _read_within(doc.get("startBy"), "startBy", errors)
    deadline_within = _read_within(doc.get("deadline"), "deadline", errors)
    concurrency = read_concurrency(doc.get("concurrency"), "concurrency", errors, inputs)
    rate_limit = read_rate_limit(doc.get("rateLimit"), "rateLimit", errors)
    if (
        errors.items
        or name is None
        or version is None
        or execution is None
        or timeout is None
        or retry is None
    ):
        count = len(errors.items)
        what = f"definition {name!r}" if name else "definition"
        raise InvalidInput(f"invalid {what}: {count} problem{'s' * (count != 1)}", errors.items)
    return Definition(
        name=name,
        version=version,
        description=description,
        inputs=inputs,
        outputs=outputs,
        execution=execution,
        timeout=timeout,
        retry=retry,
        circuit_breaker=breaker,
        start_within=start_within,
        deadline_within=deadline_within,
        concurrency=concurrency,
        rate_limit=rate_limit,
    )


MAX_WITHIN = 400 * 86400.0
"""As far as an executeAt may lie ahead (SubmitLimits.max_future)."""


def _read_within(raw: Any, path: str, errors: ErrorList) -> float | None:
    """A definition's ``startBy`` or ``deadline``: a duration after executeAt (60, "5m", "2h"),
    the default of a submission that names no instant of its own."""
    if raw is None:
        return None
    seconds = read_seconds(duration_seconds(raw), path, errors, 0.0)
    if seconds is not None and seconds > MAX_WITHIN:
        errors.add(path, f"must be at most {MAX_WITHIN / 86400:g} days after executeAt")
        return None
    return seconds


def _read_name(value: Any, errors: ErrorList) -> str | None:
    name = read_str(value, "name", errors)
    if name is None or NAME.fullmatch(name):
        return name
    errors.add(
        "name",
        f"must match ^{NAME.pattern}$: 1 to 128 lower-case letters, digits, '_', '.' or '-',"
        f" starting with a letter or digit; got {describe(name)}",
    )
    return None


def _read_retry(raw: Any, errors: ErrorList) -> RetryPolicy | None:
    if raw is None:
        return RetryPolicy()
    if not isinstance(raw, Mapping):
        errors.add("retry", f"must be a mapping with keys {', '.join(_RETRY_KEYS)}")
        return None
    check_keys(raw, _RETRY_KEYS, "retry", errors)
    attempts = read_positive_int(raw.get("maxAttempts"), "retry.maxAttempts", errors, 3)
    lost = read_positive_int(
        raw.get("maxLostAttempts"), "retry.maxLostAttempts", errors, MAX_LOST_ATTEMPTS
    )
    base = read_seconds(raw.get("baseDelay"), "retry.baseDelay", errors, 1.0)
    top = read_seconds(raw.get("maxDelay"), "retry.maxDelay", errors, 300.0)
    if base is not None and top is not None and top < base:
        given = "is" if "maxDelay" in raw else "defaults to"
        errors.add("retry.maxDelay", f"must be at least baseDelay ({base:g}) but {given} {top:g}")
        top = None
    kinds = _read_retry_on(raw.get("retryOn"), errors)
    if attempts is None or lost is None or base is None or top is None or kinds is None:
        return None
    return RetryPolicy(attempts, base, top, kinds, lost)


def _read_retry_on(raw: Any, errors: ErrorList) -> frozenset[str] | None:
    allowed = ", ".join(sorted(RETRYABLE_KINDS))
    if raw is None:
        return RETRYABLE_KINDS
    if not isinstance(raw, list):
        errors.add("retry.retryOn", f"must be a list of error kinds from: {allowed}")
        return None
    before = len(errors.items)
    for kind in raw:
        if isinstance(kind, str) and kind in PERMANENT_KINDS:
            errors.add(
                "retry.retryOn", f"{kind!r} is permanent and never retried; allowed: {allowed}"
            )
        elif not isinstance(kind, str) or kind not in RETRYABLE_KINDS:
            errors.add("retry.retryOn", f"unknown error kind {quote(kind)}; allowed: {allowed}")
    return frozenset(raw) if len(errors.items) == before else None


# -- the canonical document, its hash, and differences --------------------------------------------


def definition_to_document(d: Definition) -> dict[str, Any]:
    """The canonical JSON-able document: fields in long form, ``retryOn`` sorted."""
    retry: dict[str, Any] = {
        "maxAttempts": d.retry.max_attempts,
        "baseDelay": float(d.retry.base_delay),
        "maxDelay": float(d.retry.max_delay),
        "retryOn": sorted(d.retry.retry_on),
    }
    # Newer fields appear only when set, so that every definition stored before them keeps
    # its content hash (re-applying the same file stays a no-op).
    if d.retry.max_lost_attempts != MAX_LOST_ATTEMPTS:
        retry["maxLostAttempts"] = d.retry.max_lost_attempts
    doc: dict[str, Any] = {
        "name": d.name,
        "version": d.version,
        "description": d.description,
        "inputs": {name: field_to_document(spec) for name, spec in d.inputs.items()},
        "outputs": {name: field_to_document(spec) for name, spec in d.outputs.items()},
        "execution": execution_to_document(d.execution),
        "timeout": float(d.timeout),
        "retry": retry,
    }
    if d.circuit_breaker is not None:
        doc["circuitBreaker"] = breaker_to_document(d.circuit_breaker)
    if d.start_within is not None:
        doc["startBy"] = float(d.start_within)
    if d.deadline_within is not None:
        doc["deadline"] = float(d.deadline_within)
    if d.concurrency is not None:
        doc["concurrency"] = d.concurrency.to_document()
    if d.rate_limit is not None:
        doc["rateLimit"] = d.rate_limit.to_document()
    return doc


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def content_hash(d: Definition) -> str:
    """sha256 (hex) of the canonical document; the same definition in any format or key order
    has the same hash."""
    return hashlib.sha256(_canonical_json(definition_to_document(d)).encode()).hexdigest()


def diff_definitions(a: Definition, b: Definition) -> list[str]:
    """Sorted dotted paths whose values differ between two definitions' canonical documents."""
    paths: list[str] = []
    _diff(definition_to_document(a), definition_to_document(b), "", paths)
    return sorted(paths)


def _diff(a: Any, b: Any, path: str, paths: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a.keys() | b.keys():
            sub = join(path, key)
            if key in a and key in b:
                _diff(a[key], b[key], sub, paths)
            else:
                paths.append(sub)
    elif _canonical_json(a) != _canonical_json(b):  # so that 1 and 1.0 or true differ
        paths.append(path)
