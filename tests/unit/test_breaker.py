"""The circuit breaker's rule (domain/breaker.py), pure: its transitions, and the definition
file's ``circuitBreaker`` block with a clear error per bad value (in YAML and XML)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.factories import definition_doc
from tickwheel.domain.breaker import (
    Breaker,
    BreakerConfig,
    BreakerState,
    after_attempt,
    start_probe,
)
from tickwheel.domain.definition_files import parse_definition
from tickwheel.domain.definitions import (
    content_hash,
    definition_from_document,
    definition_to_document,
)
from tickwheel.domain.errors import InvalidInput

NOW = datetime(2026, 3, 1, tzinfo=UTC)
A, B = uuid.uuid4(), uuid.uuid4()


def run(config: BreakerConfig, outcomes: str) -> tuple[Breaker, list[BreakerState]]:
    breaker, seen = Breaker(), []
    for o in outcomes:
        breaker, t = after_attempt(config, breaker, A, o == "f", NOW)
        if t is not None:
            seen.append(t.to_state)
    return breaker, seen


def test_consecutive_failures_open_it_and_a_success_resets_the_streak() -> None:
    config = BreakerConfig(consecutive_failures=3)
    assert run(config, "ffsff")[1] == []
    breaker, seen = run(config, "ffsfff")
    assert seen == [BreakerState.OPEN] and breaker.state is BreakerState.OPEN
    assert breaker.cool_down_until == NOW + timedelta(seconds=60)


def test_the_failure_rate_needs_a_full_window() -> None:
    config = BreakerConfig(failure_rate=0.5, window=4)
    assert run(config, "fff")[1] == []  # 3 of 3, but the window is not full yet
    assert run(config, "sfsf")[1] == [BreakerState.OPEN]
    assert run(config, "sssssf")[1] == []  # 1 of the last 4
    assert run(config, "sssfsf")[1] == [BreakerState.OPEN]  # 2 of the last 4: at least half


def test_only_the_probe_decides_while_half_open() -> None:
    config = BreakerConfig(consecutive_failures=1, cool_down=5)
    opened, _ = after_attempt(config, Breaker(), A, True, NOW)
    assert after_attempt(config, opened, A, True, NOW) == (opened, None)  # open: ignored
    probing, t = start_probe(opened, B)
    assert t.to_state is BreakerState.HALF_OPEN and probing.probe_execution_id == B
    assert after_attempt(config, probing, A, False, NOW) == (probing, None)
    closed, t2 = after_attempt(config, probing, B, False, NOW)
    assert closed == Breaker() and t2 is not None and t2.to_state is BreakerState.CLOSED
    again, t3 = after_attempt(config, probing, B, True, NOW + timedelta(seconds=9))
    assert again.state is BreakerState.OPEN and t3 is not None
    assert again.cool_down_until == NOW + timedelta(seconds=14)


@given(st.text(alphabet="sf", max_size=200), st.integers(1, 10), st.integers(1, 30))
def test_a_closed_breaker_keeps_at_most_its_window(outcomes: str, streak: int, window: int) -> None:
    breaker, seen = run(BreakerConfig(consecutive_failures=streak, window=window), outcomes)
    assert len(breaker.recent) <= window
    # Once open, nothing but a probe moves it: at most one transition without probes.
    assert seen in ([], [BreakerState.OPEN])
    if not seen:
        assert breaker.consecutive_failures < streak


def test_the_block_is_read_from_yaml_and_xml_and_kept_out_of_old_hashes() -> None:
    yaml = """
name: pay
version: 1
execution: {type: python, entrypoint: "tickwheel.examples.jobs:add"}
circuitBreaker: {consecutiveFailures: 5, failureRate: 0.5, window: 20, coolDown: 2m}
"""
    d = parse_definition(yaml, "yaml")
    assert d.circuit_breaker == BreakerConfig(5, 0.5, 20, 120.0)
    xml = (
        '<definition><name>pay</name><version>1</version><execution type="python" '
        'entrypoint="tickwheel.examples.jobs:add"/><circuitBreaker consecutiveFailures="5" '
        'failureRate="0.5" window="20" coolDown="120"/></definition>'
    )
    assert parse_definition(xml, "xml").circuit_breaker == d.circuit_breaker
    assert definition_to_document(d)["circuitBreaker"]["coolDown"] == 120.0
    plain = definition_from_document(definition_doc())
    assert "circuitBreaker" not in definition_to_document(plain)
    with_breaker = definition_from_document(
        {**definition_doc(), "circuitBreaker": {"consecutiveFailures": 1}}
    )
    assert content_hash(with_breaker) != content_hash(plain)


@pytest.mark.parametrize(
    ("block", "path", "message"),
    [
        ("yes", "circuitBreaker", "must be a mapping"),
        ({}, "circuitBreaker", "needs consecutiveFailures, failureRate or both"),
        ({"consecutiveFailures": 0}, "circuitBreaker.consecutiveFailures", "at least 1"),
        ({"consecutiveFailures": "5"}, "circuitBreaker.consecutiveFailures", "an integer"),
        ({"failureRate": 1.5}, "circuitBreaker.failureRate", "in (0, 1]"),
        ({"failureRate": True}, "circuitBreaker.failureRate", "in (0, 1]"),
        ({"failureRate": 0.5, "window": 5000}, "circuitBreaker.window", "at most 1000"),
        ({"failureRate": 0.5, "coolDown": "soon"}, "circuitBreaker.coolDown", "seconds"),
        ({"failureRate": 0.5, "coolDown": -1}, "circuitBreaker.coolDown", "above 0"),
        ({"failureRate": 0.5, "coolDown": "9999h"}, "circuitBreaker.coolDown", "7 days"),
        ({"failureRate": 0.5, "halfOpen": 1}, "circuitBreaker.halfOpen", "unknown key"),
    ],
)
def test_a_bad_block_names_its_field(block: object, path: str, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        definition_from_document({**definition_doc(), "circuitBreaker": block})
    found = {e.path: e.message for e in caught.value.errors}
    assert path in found and message in found[path], found
