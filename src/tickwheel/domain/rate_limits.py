"""Rate limits (issue 14): at most ``limit`` starts per ``period`` for a definition or a whole
tenant, as a token bucket kept in the database so that every worker draws on one budget.

A bucket holds up to ``burst`` tokens and gains ``limit / period`` tokens a second; each start
takes one. A token bucket rather than a sliding window: its state is two numbers per bucket
(tokens and the instant they were counted), refilled lazily by arithmetic at claim time, where
a sliding window needs the instants of the last ``limit`` starts; and the instant the next
token comes is one division, which is what a worker needs to sleep instead of polling. Over any
window of one period at most ``limit + burst`` executions start; sustained, ``limit``.

Pure: the store reads the buckets under a lock, ``allocate`` picks what may start, and the
store writes the tokens back in the same transaction."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from tickwheel.domain.errors import ErrorList
from tickwheel.domain.fieldtypes import check_keys, describe

RATE_LIMIT_KEYS: Final = ("limit", "period", "burst")
MAX_LIMIT: Final = 1_000_000
MAX_PERIOD: Final = 86400.0
"""A day: a budget per longer period is a quota, not a rate."""
MIN_PERIOD: Final = 0.001
EPSILON: Final = 1e-9
"""Float slack: a bucket refilled to 0.9999999999 by arithmetic has its token."""
_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class RateLimitSpec:
    """``rateLimit`` of a definition file, or a tenant's limit set through the API."""

    limit: int
    period: float = 1.0
    """Seconds."""
    burst: int | None = None
    """Tokens a full bucket holds; ``limit`` when unset."""

    @property
    def capacity(self) -> int:
        return self.limit if self.burst is None else self.burst

    @property
    def per_second(self) -> float:
        return self.limit / self.period

    def to_document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"limit": self.limit, "period": _period_text(self.period)}
        if self.burst is not None:
            doc["burst"] = self.burst
        return doc


def _period_text(seconds: float) -> str:
    return f"{seconds:g}s"


def period_seconds(value: Any) -> Any:
    """``1s``, ``500ms``, ``1m``, ``1h`` or a number of seconds; anything else is left for the
    caller to name as wrong."""
    if isinstance(value, str):
        text = value.strip()
        for unit in ("ms", "s", "m", "h"):
            if text.endswith(unit) and (unit != "s" or not text.endswith("ms")):
                try:
                    return float(text[: -len(unit)]) * _UNITS[unit]
                except ValueError:
                    return value
    return value


def _count(raw: Any, path: str, errors: ErrorList) -> int | None:
    if isinstance(raw, bool) or not isinstance(raw, int):
        errors.add(path, f"must be an integer, got {describe(raw)}")
    elif raw < 1:
        errors.add(path, f"must be at least 1, got {raw}")
    elif raw > MAX_LIMIT:
        errors.add(path, f"must be at most {MAX_LIMIT:,}, got {raw}")
    else:
        return raw
    return None


def read_rate_limit(raw: Any, path: str, errors: ErrorList) -> RateLimitSpec | None:
    """A ``rateLimit`` mapping (definition file or API body); None when absent or wrong
    (errors added, each naming its field)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        errors.add(path, f"must be a mapping with keys {', '.join(RATE_LIMIT_KEYS)}")
        return None
    before = len(errors.items)
    check_keys(raw, RATE_LIMIT_KEYS, path, errors)
    limit = None
    if raw.get("limit") is None:
        errors.add(f"{path}.limit", "is required")
    else:
        limit = _count(raw.get("limit"), f"{path}.limit", errors)
    period: float | None = 1.0
    if raw.get("period") is not None:
        value = period_seconds(raw.get("period"))
        if isinstance(value, bool) or not isinstance(value, int | float):
            errors.add(
                f"{path}.period",
                f'must be seconds (1, "1s", "500ms", "1m", "1h"), got {describe(raw["period"])}',
            )
            period = None
        else:
            try:
                period = float(value)
            except OverflowError:
                period = math.inf
            if not math.isfinite(period) or not MIN_PERIOD <= period <= MAX_PERIOD:
                errors.add(
                    f"{path}.period",
                    f"must be between 1 ms and 86400 s (a day), got {describe(raw['period'])}",
                )
                period = None
    burst = None
    if raw.get("burst") is not None:
        burst = _count(raw.get("burst"), f"{path}.burst", errors)
    if len(errors.items) != before or limit is None or period is None:
        return None
    return RateLimitSpec(limit, period, burst)


def sync_action(
    stored: tuple[int, float, int, int | None] | None, version: int, spec: RateLimitSpec | None
) -> str | None:
    """What a submission of definition ``version`` (with ``spec``) must write to the bucket
    stored as (limit, period, burst, source version): "set", "drop" or nothing (None). A bucket
    from a newer version, or one set through the API, is left as it is."""
    if stored is None:
        return None if spec is None else "set"
    limit, period, burst, source = stored
    if source is None or source > version:
        return None
    if spec is None:
        return "drop"
    same = (limit, period, burst) == (spec.limit, spec.period, spec.capacity)
    return None if same else "set"


# -- the bucket -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bucket:
    """A bucket as read under its lock, refilled to the claim's instant."""

    tenant: str
    definition_uri: str
    """'' for the tenant's own bucket."""
    spec: RateLimitSpec
    tokens: float


@dataclass(frozen=True)
class BucketState:
    """A bucket as shown (API, CLI, dashboard, /metrics)."""

    tenant: str
    definition_uri: str
    spec: RateLimitSpec
    tokens: float
    """Refilled to ``at``."""
    at: datetime
    source_version: int | None
    """The definition version it came from; None for a limit set through the API."""


def refilled(tokens: float, capacity: int, per_second: float, elapsed: float) -> float:
    return min(float(capacity), tokens + max(0.0, elapsed) * per_second)


def seconds_to_token(bucket: Bucket) -> float:
    """How long until the bucket holds one token (0 when it does)."""
    missing = 1.0 - bucket.tokens
    return 0.0 if missing <= EPSILON else missing / bucket.spec.per_second


@dataclass(frozen=True)
class Candidate:
    execution_id: Any
    tenant: str
    definition_uri: str


def _keys(
    tenant: str, definition_uri: str, by_key: Mapping[tuple[str, str], Bucket]
) -> list[tuple[str, str]]:
    return [k for k in ((tenant, definition_uri), (tenant, "")) if k in by_key]


def lanes(buckets: Iterable[Bucket]) -> list[dict[str, Any]]:
    """Where the rate step looks for candidates: each bucket with a token (a definition's only
    while its tenant's bucket, if any, has one too), a tenant's leaving out its definitions that
    have buckets of their own."""
    by_key = {(b.tenant, b.definition_uri): b for b in buckets}
    own: dict[str, list[str]] = {}
    for tenant, uri in by_key:
        if uri:
            own.setdefault(tenant, []).append(uri)
    answer: list[dict[str, Any]] = []
    for (tenant, uri), b in by_key.items():
        keys = _keys(tenant, uri, by_key)
        if b.tokens < 1.0 - EPSILON or any(by_key[k].tokens < 1.0 - EPSILON for k in keys):
            continue
        exclude = [] if uri else own.get(tenant, [])
        answer.append({"tenant": tenant, "definition_uri": uri, "exclude": exclude})
    return answer


def allocate(buckets: Iterable[Bucket], candidates: Iterable[Candidate], limit: int) -> list[Any]:
    """Which candidates (in claim order) may start, at most ``limit``: each takes a token of its
    definition's bucket and of its tenant's, and starts only when both (those that exist) hold
    one."""
    by_key = {(b.tenant, b.definition_uri): b for b in buckets}
    left = {key: b.tokens for key, b in by_key.items()}
    chosen: list[Any] = []
    seen: set[Any] = set()
    for c in candidates:
        if len(chosen) >= limit:
            break
        if c.execution_id in seen:
            continue
        seen.add(c.execution_id)
        keys = _keys(c.tenant, c.definition_uri, by_key)
        if not keys or any(left[k] < 1.0 - EPSILON for k in keys):
            continue
        for k in keys:
            left[k] -= 1.0
        chosen.append(c.execution_id)
    return chosen


@dataclass(frozen=True)
class Drawn:
    tokens: dict[tuple[str, str], float]
    """What each bucket that lost tokens holds now."""
    retry_after: float | None
    """Seconds until the first empty bucket has a token again; None when none is empty."""


def draw(buckets: Iterable[Bucket], started: Iterable[tuple[str, str]]) -> Drawn:
    """The buckets after the executions ``started`` (tenant, definition uri) took their tokens."""
    by_key = {(b.tenant, b.definition_uri): b for b in buckets}
    left = {key: b.tokens for key, b in by_key.items()}
    changed: set[tuple[str, str]] = set()
    for tenant, uri in started:
        for k in _keys(tenant, uri, by_key):
            left[k] = max(0.0, left[k] - 1.0)
            changed.add(k)
    waits = [
        seconds_to_token(Bucket(b.tenant, b.definition_uri, b.spec, left[key]))
        for key, b in by_key.items()
        if left[key] < 1.0 - EPSILON
    ]
    return Drawn({k: left[k] for k in changed}, min(waits) if waits else None)
