"""What a JSON value must be before tickwheel stores it, and how a stored one is made safe to show.

Python's ``json`` accepts more than either database or any JSON encoder will give back: a lone
surrogate (``"\\ud800"``) is valid JSON text but no UTF-8, so SQLite keeps it and every later
response that holds it fails to encode; PostgreSQL refuses NUL in text and jsonb; a value nested
900 deep is stored, then breaks every recursive reader; integers beyond 64 bits break the
columns and the readers of other languages. So each value that gets stored is checked at the
edge (``problems``), and each value read back is passed through ``readable``, so that a row
stored before these checks (or written around them) can never break a read.
"""

from __future__ import annotations

import json
import math
from typing import Any

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
VERSION_MAX = 2**31 - 1
"""The largest version (and attempt budget) there is: both are 32-bit columns in PostgreSQL."""
MAX_DEPTH = 64
"""Arrays and objects inside one another, counting the outermost as 1."""
MAX_PROBLEMS = 20
"""A value can be wrong in a million places; the first few are enough to fix it."""


def int64_problem(value: int) -> str | None:
    """Why ``value`` does not fit a signed 64-bit integer, or None when it does."""
    if INT64_MIN <= value <= INT64_MAX:
        return None
    return f"is outside the signed 64-bit range ({INT64_MIN} to {INT64_MAX})"


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored (NUL, lone surrogates), or None when it can."""
    if "\x00" in text:
        return "must not contain a NUL character (\\u0000)"
    if _has_surrogate(text):
        return "must not contain a lone surrogate (\\ud800-\\udfff): it is not valid Unicode"
    return None


def _has_surrogate(text: str) -> bool:
    # Fast path: nearly all text encodes; only a failure needs a closer look.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def problems(value: Any, path: str) -> list[tuple[str, str]]:
    """Each place where ``value`` is not a storable JSON value, as ``(dotted path, message)``.

    Iterative, so that a value nested past the interpreter's recursion limit is reported, not
    crashed on."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack and len(found) < MAX_PROBLEMS:
        item, where, depth = stack.pop()
        problem = _scalar_problem(item)
        if problem is not None:
            found.append((where, problem))
            continue
        if isinstance(item, list | dict):
            if depth + 1 > MAX_DEPTH:
                found.append((where, f"is nested too deep (more than {MAX_DEPTH} levels)"))
                continue
            if isinstance(item, list):
                stack.extend((v, f"{where}.{i}", depth + 1) for i, v in enumerate(item))
                continue
            for key, v in item.items():
                if not isinstance(key, str):
                    found.append((where, f"has a key that is not a string: {key!r}"))
                    continue
                key_problem = text_problem(key)
                if key_problem is not None:
                    found.append((where, f"has a key that {key_problem.replace('must', 'may')}"))
                    continue
                stack.append((v, f"{where}.{key}", depth + 1))
    return found


def _scalar_problem(item: Any) -> str | None:
    if item is None or isinstance(item, bool | list | dict):
        return None
    if isinstance(item, int):
        return int64_problem(item)
    if isinstance(item, float):
        return None if math.isfinite(item) else f"must be a finite number, got {item}"
    if isinstance(item, str):
        return text_problem(item)
    return f"is not a JSON value ({type(item).__name__})"


def first_problem(value: Any) -> str | None:
    """The first problem of ``value`` as one message, or None when it is storable."""
    found = problems(value, "")
    if not found:
        return None
    where, message = found[0]
    return f"{message} (at {where.lstrip('.')})" if where else message


REPLACEMENT = "\ufffd"
TOO_DEEP = f"[nested more than {MAX_DEPTH} levels: not shown]"
UNREADABLE = "[stored value is not readable JSON: not shown]"


def load_readable(text: str | bytes) -> Any:
    """A stored JSON text as a value every reader can handle (see ``readable``); text that does
    not parse at all (or only past the recursion limit) becomes the UNREADABLE marker."""
    try:
        return readable(json.loads(text))
    except (ValueError, RecursionError):
        return UNREADABLE


def readable_object(value: Any) -> dict[str, Any]:
    """A stored value that must be an object (an execution's inputs), as one."""
    return value if isinstance(value, dict) else {"unreadable": UNREADABLE}


def readable(value: Any) -> Any:
    """``value`` as a stored row gave it, with whatever no response could encode replaced:
    lone surrogates and NUL become U+FFFD, values nested past the limit a marker string, other
    non-JSON values their repr. Returns ``value`` itself (no copy) when it is clean."""
    if not problems(value, ""):
        return value
    return _clean(value, 1)


def _clean(value: Any, depth: int) -> Any:
    # Recursion is bounded by MAX_DEPTH, far below the interpreter's limit.
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list | dict) and depth > MAX_DEPTH:
        return TOO_DEEP
    if isinstance(value, list):
        return [_clean(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {clean_text(str(k)): _clean(v, depth + 1) for k, v in value.items()}
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return clean_text(repr(value))


def clean_text(text: str) -> str:
    """``text`` with NUL and lone surrogates replaced by U+FFFD: storable and encodable."""
    if text_problem(text) is None:
        return text
    return "".join(REPLACEMENT if c == "\x00" or "\ud800" <= c <= "\udfff" else c for c in text)
