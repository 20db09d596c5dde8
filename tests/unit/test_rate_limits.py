"""The rate-limit rules, pure: ``rateLimit`` read from YAML, JSON and XML definition files
(periods with units, each bad field named), and the token bucket's arithmetic: refill capped at
the burst, the allocation that takes a token of every bucket a start draws on, and the wait
until the next token."""

from __future__ import annotations

import pytest

from tickwheel.domain.definition_files import parse_definition
from tickwheel.domain.definitions import definition_to_document
from tickwheel.domain.errors import ErrorList, InvalidInput
from tickwheel.domain.rate_limits import (
    Bucket,
    Candidate,
    RateLimitSpec,
    allocate,
    draw,
    lanes,
    read_rate_limit,
    refilled,
)

YAML = """
name: charge
version: 1
execution: {type: python, entrypoint: "tickwheel.examples.jobs:greet"}
rateLimit: {limit: 10, period: 500ms, burst: 20}
"""
XML = """<definition><name>charge</name><version>1</version>
<execution type="python" entrypoint="tickwheel.examples.jobs:greet"/>
<rateLimit limit="10" period="0.5" burst="20"/></definition>"""


@pytest.mark.parametrize(("text", "fmt"), [(YAML, "yaml"), (XML, "xml")])
def test_a_definition_file_sets_rate_limit(text: str, fmt: str) -> None:
    d = parse_definition(text, fmt)
    assert d.rate_limit == RateLimitSpec(10, 0.5, 20)
    assert d.rate_limit.per_second == 20.0
    assert definition_to_document(d)["rateLimit"] == {"limit": 10, "period": "0.5s", "burst": 20}


@pytest.mark.parametrize(
    ("period", "seconds"), [(2, 2.0), ("1s", 1.0), ("250ms", 0.25), ("1m", 60.0), ("1h", 3600.0)]
)
def test_periods_take_units(period: object, seconds: float) -> None:
    spec = read_rate_limit({"limit": 1, "period": period}, "rateLimit", ErrorList())
    assert spec is not None and spec.period == seconds and spec.capacity == 1


def test_bad_fields_are_named_together() -> None:
    errors = ErrorList()
    raw = {"limit": 0, "period": "nan", "burst": -1, "rate": 3}
    assert read_rate_limit(raw, "rateLimit", errors) is None
    assert sorted(e.path for e in errors.items) == [
        "rateLimit.burst",
        "rateLimit.limit",
        "rateLimit.period",
        "rateLimit.rate",
    ]
    bad = YAML.replace("limit: 10", "limit: 10.5")
    with pytest.raises(InvalidInput) as caught:
        parse_definition(bad, "yaml")
    assert [e.path for e in caught.value.errors] == ["rateLimit.limit"]


def test_a_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    assert refilled(0.0, 5, 2.0, 1.0) == 2.0
    assert refilled(4.0, 5, 2.0, 10.0) == 5.0
    assert refilled(1.0, 5, 2.0, -3.0) == 1.0  # a clock that went back adds nothing


def test_a_start_takes_a_token_of_its_definition_and_of_its_tenant() -> None:
    spec = RateLimitSpec(1, 1.0, 10)
    buckets = [
        Bucket("acme", "", spec, 3.0),
        Bucket("acme", "d1", spec, 1.5),
        Bucket("globex", "d1", spec, 0.2),
    ]
    found = [
        Candidate(1, "acme", "d1"),
        Candidate(2, "acme", "d1"),  # d1 has no second token
        Candidate(3, "acme", "d2"),
        Candidate(3, "acme", "d2"),  # the same row from two lanes counts once
        Candidate(4, "globex", "d1"),  # an empty bucket
        Candidate(5, "acme", "d3"),
        Candidate(6, "acme", "d3"),  # the tenant's 3 tokens are gone
    ]
    assert allocate(buckets, found, 10) == [1, 3, 5]
    assert allocate(buckets, found, 2) == [1, 3]
    drawn = draw(buckets, [("acme", "d1"), ("acme", "d2"), ("acme", "d3")])
    assert drawn.tokens == {("acme", ""): 0.0, ("acme", "d1"): 0.5}
    # The first bucket short of a token to get one: acme's d1 (0.5 s), before globex's d1
    # (0.8 s) and acme's own (1 s).
    assert drawn.retry_after == pytest.approx(0.5)


def test_lanes_skip_empty_buckets_and_keep_definitions_with_their_own_apart() -> None:
    spec = RateLimitSpec(1, 1.0, 10)
    buckets = [
        Bucket("acme", "", spec, 3.0),
        Bucket("acme", "d1", spec, 0.0),
        Bucket("acme", "d2", spec, 2.0),
        Bucket("globex", "", spec, 0.5),
        Bucket("globex", "d1", spec, 5.0),  # its tenant's bucket is empty: no lane
    ]
    assert lanes(buckets) == [
        {"tenant": "acme", "definition_uri": "", "exclude": ["d1", "d2"]},
        {"tenant": "acme", "definition_uri": "d2", "exclude": []},
    ]
