"""Credentials by reference: ``${{ secrets.NAME }}`` in a definition, resolved on the worker.

A definition never holds a credential, only its name; the worker that runs it looks the value
up (its environment, ``TICKWHEEL_SECRET_<NAME>``, or its secrets file) for that one request and
keeps it nowhere. Pure: the lookup is a function the caller passes in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Final

__all__ = [
    "SECRET_NAME",
    "MissingSecret",
    "has_literal_credential",
    "is_sensitive_name",
    "redact",
    "render",
    "secret_names",
    "template_problem",
]

SECRET_NAME: Final = re.compile(r"[A-Z][A-Z0-9_]{0,127}")
_REF: Final = re.compile(r"\$\{\{\s*secrets\.([A-Za-z0-9_]*)\s*\}\}")
_ANY_TEMPLATE: Final = re.compile(r"\$\{\{.*?(\}\}|$)")
# Header (or query parameter) names that carry credentials: their values must be references.
_SENSITIVE_EXACT: Final = frozenset(
    {"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "apikey"}
)
_SENSITIVE_PARTS: Final = (
    "token",
    "secret",
    "password",
    "passwd",
    "api-key",
    "api_key",
    "apikey",
    "credential",
)
# What may stand beside a reference in a sensitive value: a scheme word, a cookie name, spaces.
_TOKENISH: Final = re.compile(r"[A-Za-z0-9+/=_.~-]{16,}")


class MissingSecret(LookupError):
    """A referenced secret has no value on this worker; names the secret, never a value."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"secret {name!r} is not set on this worker: set TICKWHEEL_SECRET_{name} or add"
            f" {name}=... to its secrets file"
        )
        self.name = name


def is_sensitive_name(name: str) -> bool:
    """Whether a header or query parameter name is one that carries credentials."""
    lowered = name.lower()
    return lowered in _SENSITIVE_EXACT or any(part in lowered for part in _SENSITIVE_PARTS)


def secret_names(text: str) -> list[str]:
    """The secret names ``text`` references, in order (repeats kept)."""
    return [m.group(1) for m in _REF.finditer(text)]


def template_problem(text: str) -> str | None:
    """What is wrong with the ``${{ ... }}`` templates in ``text``, or None.

    Only ``${{ secrets.NAME }}`` is understood here, NAME in upper case letters, digits and '_'.
    """
    for match in _REF.finditer(text):
        if not SECRET_NAME.fullmatch(match.group(1)):
            return (
                f"secret name {match.group(1)!r} must be upper case letters, digits and '_',"
                " starting with a letter (e.g. ${{ secrets.API_TOKEN }})"
            )
    rest = _REF.sub("", text)
    if _ANY_TEMPLATE.search(rest):
        return "the only template allowed here is ${{ secrets.NAME }}"
    return None


def has_literal_credential(value: str) -> bool:
    """Whether a sensitive value holds a credential itself rather than a reference to one:
    it references no secret, or keeps a token-like run of text beside its references."""
    if not _REF.search(value):
        return bool(value.strip())
    return bool(_TOKENISH.search(_REF.sub(" ", value)))


def render(
    text: str,
    lookup: Callable[[str], str | None],
    *,
    quote: Callable[[str], str] | None = None,
    resolved: list[str] | None = None,
) -> str:
    """``text`` with each reference replaced by its value (``quote``d when given). Raises
    MissingSecret for the first one without a value. ``resolved`` collects the values used,
    so that the caller can keep them out of anything it reports."""

    def value_of(match: re.Match[str]) -> str:
        name = match.group(1)
        value = lookup(name)
        if value is None:
            raise MissingSecret(name)
        shown = quote(value) if quote else value
        if resolved is not None:
            resolved.extend((value, shown))
        return shown

    return _REF.sub(value_of, text)


def redact(text: str, values: Iterable[str]) -> str:
    """``text`` with every secret value in ``values`` replaced by ``***`` (longest first, so that
    a value inside another is not half-shown)."""
    for value in sorted({v for v in values if v}, key=len, reverse=True):
        text = text.replace(value, "***")
    return text
