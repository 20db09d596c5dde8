"""Concurrency limits: how many executions of one definition and key may run at once.

A definition (``concurrency:`` in its file) or a submission (overriding it) gives a key
template, a limit and an order. The key is a ``${{ inputs.name }}`` expression (or text around
such expressions), evaluated once at submit time over the validated inputs and stored with the
execution; no key means one group for the whole definition. The claim enforces it in the
database (docs/flow-control.md): at most ``limit`` executions of one (tenant, definition, key)
run at once, and with ``order: fifo`` they start in ``executeAt`` order, then submission order,
a retry keeping its place."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from tickwheel.domain.errors import ErrorList
from tickwheel.domain.fieldtypes import check_keys, describe
from tickwheel.domain.workflow_expressions import (
    EXPRESSION,
    InputRef,
    UnresolvedReference,
    parse_ref,
    resolve,
)

Order = Literal["fifo", "none"]
ORDERS: Final = ("fifo", "none")
LIMIT_MAX: Final = 1000
"""A limit above this is no limit worth storing; it also bounds the slots a claim may probe."""
KEY_MAX: Final = 255
"""The evaluated key's length (bytes of UTF-8 text): it is an index column."""
TEMPLATE_MAX: Final = 1000
_KEYS: Final = ("key", "limit", "order")


@dataclass(frozen=True)
class ConcurrencySpec:
    """What a definition or a submission asks: ``key`` is a template (None: the whole
    definition is one group)."""

    limit: int
    key: str | None = None
    order: Order = "fifo"

    def to_document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"limit": self.limit, "order": self.order}
        if self.key is not None:
            doc["key"] = self.key
        return doc


@dataclass(frozen=True)
class Concurrency:
    """What an execution carries: the key evaluated over its inputs ("" for the whole
    definition), its limit and its order."""

    key: str
    limit: int
    order: Order = "fifo"


def read_concurrency(
    raw: Any, path: str, errors: ErrorList, inputs: Mapping[str, Any] | None = None
) -> ConcurrencySpec | None:
    """Checks a ``concurrency`` mapping; ``inputs`` (the declared input names) lets a
    definition refuse a key that names an input it does not have."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        errors.add(path, "must be a mapping with keys key, limit, order")
        return None
    before = len(errors.items)
    check_keys(raw, _KEYS, path, errors)
    limit = raw.get("limit")
    if isinstance(limit, bool) or not isinstance(limit, int):
        got = describe(limit) if limit is not None else "nothing"
        errors.add(f"{path}.limit", f"must be an integer from 1 to {LIMIT_MAX}, got {got}")
    elif not 1 <= limit <= LIMIT_MAX:
        errors.add(f"{path}.limit", f"must be from 1 to {LIMIT_MAX}, got {limit}")
    order = raw.get("order", "fifo")
    if order not in ORDERS:
        errors.add(f"{path}.order", f"must be one of fifo, none; got {describe(order)}")
    key = raw.get("key")
    if key is not None:
        _check_template(key, f"{path}.key", errors, inputs)
    if len(errors.items) != before or not isinstance(limit, int):
        return None
    return ConcurrencySpec(limit=limit, key=key, order=order)


def spec_of(raw: Any) -> ConcurrencySpec | None:
    """A submission's ``concurrency`` (a mapping as the API reads it and the SDK takes it, or a
    spec already). Raises InvalidInput naming each bad field; its input names are checked
    against the definition when the execution is prepared."""
    if raw is None or isinstance(raw, ConcurrencySpec):
        return raw
    errors = ErrorList()
    spec = read_concurrency(raw, "concurrency", errors)
    errors.raise_if_any("the execution request is invalid")
    return spec


def _check_template(
    key: Any, path: str, errors: ErrorList, inputs: Mapping[str, Any] | None
) -> None:
    if not isinstance(key, str) or not key or len(key) > TEMPLATE_MAX:
        errors.add(path, f"must be a string of 1 to {TEMPLATE_MAX} characters, such as "
                   '"${{ inputs.customer_id }}"')  # fmt: skip
        return
    for match in EXPRESSION.finditer(key):
        ref = parse_ref(match.group(1))
        if not isinstance(ref, InputRef):
            errors.add(path, f"{match.group(0)} is not an input reference: write "
                       "${{ inputs.name }}")  # fmt: skip
        elif inputs is not None and ref.name not in inputs:
            errors.add(path, f"{match.group(0)} names no input of this definition")


def evaluate(spec: ConcurrencySpec, inputs: Mapping[str, Any]) -> Concurrency:
    """The execution's concurrency: the key template over its validated inputs. Raises
    ValueError with a message naming the problem (an input without a value, a key too long)."""
    if spec.key is None:
        return Concurrency("", spec.limit, spec.order)
    try:
        value = resolve(spec.key, inputs, {})
    except UnresolvedReference as exc:
        raise ValueError(f"the concurrency key {spec.key!r} cannot be evaluated: {exc}") from None
    text = value if isinstance(value, str) else describe_json(value)
    if len(text.encode()) > KEY_MAX:
        raise ValueError(f"the concurrency key is longer than {KEY_MAX} bytes once evaluated")
    if not text:
        raise ValueError("the concurrency key evaluates to empty text")
    if not text.isprintable():
        raise ValueError("the concurrency key must be printable text once evaluated")
    return Concurrency(text, spec.limit, spec.order)


def describe_json(value: Any) -> str:
    """A non-string key value as canonical JSON (one text per value whatever its key order)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
