"""How a Job Definition is referred to: its name, its ``registry://jobs/<name>`` URI, a version.

One home for these rules so that the API, the engine, cron and workflows agree on what a valid
reference is and on the message a wrong one gets. Every parser here is strict (a full match of
the whole text, no path segments, no ``..``, ASCII only, bounded length), except
``stored_name``, which must never raise: it reads a URI back from the store (for a lookup, a log
line or a metric label), whatever was stored."""

from __future__ import annotations

import re
from typing import Final

from tickwheel.domain.errors import FieldError, InvalidInput

URI_PREFIX: Final = "registry://jobs/"
NAME: Final = re.compile(r"[a-z0-9][a-z0-9_.-]{0,127}")
"""A definition (and workflow, and task) name: lower-case ASCII letters and digits, then also
``_``, ``.`` and ``-``; it cannot start with ``.``, so ``..`` and ``.hidden`` are refused."""
_URI: Final = re.compile(re.escape(URI_PREFIX) + f"({NAME.pattern})")
URI_RULE: Final = f"must look like {URI_PREFIX}<name>"
"""The message a malformed definition URI gets, wherever it is checked."""


def is_name(text: str) -> bool:
    return NAME.fullmatch(text) is not None


def uri_of(name: str) -> str:
    """The URI of a definition name (the name is taken as given: models validate their own)."""
    return URI_PREFIX + name


def name_of(uri: str) -> str | None:
    """The name in a well-formed URI, else None."""
    match = _URI.fullmatch(uri)
    return match.group(1) if match else None


def require_name(uri: str, path: str = "definitionUri") -> str:
    """The name in a well-formed URI; anything else raises ``InvalidInput`` naming ``path``."""
    name = name_of(uri)
    if name is None:
        shown = uri if len(uri) <= 80 else uri[:77] + "..."
        raise InvalidInput(
            "the definition reference is invalid", [FieldError(path, f"{URI_RULE}; got {shown!r}")]
        )
    return name


def to_uri(text: str) -> str:
    """What a person types (``send-email`` or ``registry://jobs/send-email``) as a URI. Text
    that already has a scheme passes unchanged, to be judged by ``name_of`` where it is used."""
    return text if "://" in text else uri_of(text)


def stored_name(uri: str) -> str:
    """The name in a URI read back from the store: the name of a well-formed URI, else the text
    after its last ``/``, so a row no current writer would produce still gets looked up (and
    found missing) and labelled, instead of stopping a worker's loop."""
    return name_of(uri) or uri.rsplit("/", 1)[-1]


def versioned(uri: str, version: int | None) -> str:
    """How messages name a definition: ``registry://jobs/x version 2`` (or the URI alone)."""
    return uri if version is None else f"{uri} version {version}"


def short(uri: str) -> str:
    """A URI without the registry prefix, for tables that have no room for it."""
    return uri.removeprefix(URI_PREFIX)
