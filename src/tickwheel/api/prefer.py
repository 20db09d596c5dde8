"""The ``Prefer`` request header (RFC 7240), as far as the API honours it: ``return=minimal``
on ``POST /v1/executions/batch`` answers each item with its status and its execution's id (or
its error) instead of the whole execution, and says so in ``Preference-Applied``."""

from __future__ import annotations

from collections.abc import Iterable

MINIMAL = "return=minimal"
"""The ``Preference-Applied`` value of an answer made minimal."""


def prefers_minimal(values: Iterable[str]) -> bool:
    """Whether the ``Prefer`` header fields ``values`` ask for ``return=minimal``. Preferences
    are comma-separated, their names case-insensitive, their value a token or a quoted string,
    parameters after ``;`` ignored; a preference given more than once counts as its first
    (RFC 7240, 2), so ``return=representation, return=minimal`` is not minimal. A preference
    the API does not know, or a malformed one, is ignored, as the RFC asks."""
    for value in values:
        for preference in value.split(","):
            head = preference.split(";", 1)[0]
            name, sep, token = head.partition("=")
            if name.strip().lower() != "return":
                continue
            token = token.strip()
            if len(token) >= 2 and token[0] == token[-1] == '"':
                token = token[1:-1]
            return bool(sep) and token.lower() == "minimal"
    return False
