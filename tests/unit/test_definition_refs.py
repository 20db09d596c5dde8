"""Definition references (domain/definition_refs.py): the one place a definition's name and URI
are parsed and formatted, so hostile text is judged the same way by every caller."""

from __future__ import annotations

import pytest

from tickwheel.domain.definition_refs import (
    URI_RULE,
    is_name,
    name_of,
    require_name,
    short,
    stored_name,
    to_uri,
    uri_of,
    versioned,
)
from tickwheel.domain.errors import InvalidInput

HOSTILE_URIS = [
    "",
    "registry://jobs/",
    "greet",  # a bare name is not a URI
    "registry://jobs/a/b",
    "registry://jobs/../etc",
    "registry://jobs/..",
    "registry://jobs/.hidden",
    "registry://jobs/Greet",
    "registry://jobs/grüße",
    "registry://jobs/\uff47reet",  # a full-width letter
    "registry://jobs/greet\n",
    "registry://jobs/greet ",
    " registry://jobs/greet",
    "registry://jobs/gr eet",
    "registry://jobs/greet\x00",
    "registry://other/greet",
    "http://jobs/greet",
    "registry://jobs/" + "a" * 129,
    "registry://jobs/" + "a" * 100_000,
]


def test_a_name_and_its_uri_round_trip() -> None:
    assert uri_of("greet") == "registry://jobs/greet"
    assert name_of("registry://jobs/greet") == "greet"
    assert name_of("registry://jobs/send_email.v2-b") == "send_email.v2-b"
    assert name_of("registry://jobs/" + "a" * 128) == "a" * 128


@pytest.mark.parametrize("uri", HOSTILE_URIS)
def test_hostile_uris_have_no_name(uri: str) -> None:
    assert name_of(uri) is None


@pytest.mark.parametrize("uri", HOSTILE_URIS)
def test_require_name_says_what_is_wrong_and_where(uri: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        require_name(uri, "tasks[0].definition")
    [error] = caught.value.errors
    assert error.path == "tasks[0].definition"
    assert error.message.startswith(URI_RULE + "; got ")
    assert len(error.message) < 200  # a 100 kB URI is not echoed back whole


@pytest.mark.parametrize("name", ["", "..", ".", "-x", "_x", "a/b", "A", "é", "a" * 129, "a\n"])
def test_hostile_names_are_not_names(name: str) -> None:
    assert not is_name(name)


def test_typed_text_becomes_a_uri_and_a_scheme_passes_unchanged() -> None:
    assert to_uri("greet") == "registry://jobs/greet"
    assert to_uri("registry://jobs/greet") == "registry://jobs/greet"
    # Passed through unjudged: the check where the URI is used names the field that is wrong.
    assert to_uri("http://x/y") == "http://x/y"
    assert name_of(to_uri("a/b")) is None
    assert name_of(to_uri("")) is None


def test_a_stored_uri_always_yields_a_name_for_lookups_and_labels() -> None:
    assert stored_name("registry://jobs/greet") == "greet"
    # Never raises: a row no current writer would produce is looked up (and found missing).
    assert stored_name("legacy://x/y/old-name") == "old-name"
    assert stored_name("") == ""


def test_short_drops_only_the_registry_prefix() -> None:
    assert short("registry://jobs/greet") == "greet"
    assert short("other://greet") == "other://greet"


def test_messages_name_a_definition_with_its_version() -> None:
    assert versioned("registry://jobs/greet", 3) == "registry://jobs/greet version 3"
    assert versioned("registry://jobs/greet", None) == "registry://jobs/greet"
