"""``preview``: fire times with the DST rule that moved, doubled or skipped each, and why
(docs/cron.md). Transitions are listed in test_cron_policy.py."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from tickwheel.domain.cron import (
    DEFAULT_DST_POLICY,
    DstPolicy,
    FirePreview,
    next_fire_times,
    preview,
)

BERLIN, NEW_YORK, LORD_HOWE = "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"
GAP_BERLIN = "does not exist on 2026-03-29 in Europe/Berlin (clocks jump 02:00→03:00)"
REPEAT_BERLIN = "occurs twice on 2026-10-25 in Europe/Berlin (clocks go back 03:00→02:00)"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def rows(
    expression: str, zone: str, after: str, count: int, policy: DstPolicy = DEFAULT_DST_POLICY
) -> list[tuple[str, str, bool, str | None, str | None]]:
    """(at as UTC, local wall time matched, fires, dst, reason) for each row."""
    result = preview(expression, zone, at(after), count, policy)
    for row in result:
        assert row.local == row.at.astimezone(ZoneInfo(zone))
        assert row.at.tzinfo is UTC
    return [
        (f"{r.at:%m-%d %H:%M:%S}", f"{r.wall:%H:%M:%S}", r.fires, r.dst, r.reason) for r in result
    ]


def test_a_shifted_time_says_where_it_went() -> None:
    assert rows("30 2 * * *", BERLIN, "2026-03-28 12:00", 2) == [
        (
            "03-29 01:00:00",
            "02:30:00",
            True,
            "shifted",
            "02:30 does not exist on 2026-03-29 in Europe/Berlin (clocks jump 02:00→03:00); "
            "fired at 03:00 instead",
        ),
        ("03-30 00:30:00", "02:30:00", True, None, None),
    ]


def test_a_skipped_time_is_listed_with_why_it_did_not_fire() -> None:
    assert rows("30 2 * * *", BERLIN, "2026-03-28 12:00", 1, DstPolicy("skip")) == [
        (
            "03-29 01:00:00",
            "02:30:00",
            False,
            "skipped",
            f"02:30 {GAP_BERLIN}; not fired, as dstPolicy.nonexistent is skip",
        ),
        ("03-30 00:30:00", "02:30:00", True, None, None),
    ]


def test_times_merged_into_one_shifted_fire_make_one_row() -> None:
    assert rows("0,30 2,3 * * *", BERLIN, "2026-03-28 12:00", 2) == [
        (
            "03-29 01:00:00",
            "02:00:00",
            True,
            "shifted",
            "02:00 and 02:30 do not exist on 2026-03-29 in Europe/Berlin (clocks jump "
            "02:00→03:00); fired once at 03:00 instead (03:00 itself matches as well)",
        ),
        ("03-29 01:30:00", "03:30:00", True, None, None),
    ]
    (row,) = rows("* 2 * * *", NEW_YORK, "2026-03-07 12:00", 1)
    assert row[4] == (
        "02:00 to 02:59 (60 times) do not exist on 2026-03-08 in America/New_York (clocks jump "
        "02:00→03:00); fired once at 03:00 instead"
    )
    (row,) = rows("15,45 30 2 * * *", BERLIN, "2026-03-28 12:00", 1)
    assert row[4] == (
        "02:30:15 and 02:30:45 do not exist on 2026-03-29 in Europe/Berlin (clocks jump "
        "02:00→03:00); fired once at 03:00 instead"
    )


def test_skip_leaves_the_existing_times_of_the_hour_alone() -> None:
    result = rows("0,30 2,3 * * *", BERLIN, "2026-03-28 12:00", 2, DstPolicy("skip"))
    assert [(r[0], r[1], r[2], r[3]) for r in result] == [
        ("03-29 01:00:00", "02:00:00", False, "skipped"),
        ("03-29 01:00:00", "02:30:00", False, "skipped"),
        ("03-29 01:00:00", "03:00:00", True, None),
        ("03-29 01:30:00", "03:30:00", True, None),
    ]


BOTH = "fired at both, as dstPolicy.ambiguous is both: this is its"
REPEATED = {
    "first": [
        ("00:30", True, "first", "fired at its first occurrence (02:30 CEST) only, as "),
        ("01:30", False, "skipped", "not fired again at its second occurrence (02:30 CET), as "),
    ],
    "second": [
        ("00:30", False, "skipped", "not fired at its first occurrence (02:30 CEST), as "),
        ("01:30", True, "second", "fired at its second occurrence (02:30 CET) only, as "),
    ],
    "both": [
        ("00:30", True, "first", f"{BOTH} first occurrence (02:30 CEST)"),
        ("01:30", True, "second", f"{BOTH} second occurrence (02:30 CET)"),
    ],
}


@pytest.mark.parametrize("ambiguous", REPEATED)
def test_a_repeated_time_says_which_occurrence_fired(ambiguous: str) -> None:
    policy = DstPolicy.from_document({"ambiguous": ambiguous})
    expected = REPEATED[ambiguous]
    count = sum(fires for _, fires, _, _ in expected) + 1
    result = rows("30 2 * * *", BERLIN, "2026-10-24 12:00", count, policy)
    assert len(result) == 3 and result[2][:4] == ("10-26 01:30:00", "02:30:00", True, None)
    for row, (utc, fires, dst, reason) in zip(result, expected, strict=False):
        assert row[:4] == (f"10-25 {utc}:00", "02:30:00", fires, dst)
        assert row[4] is not None and row[4].startswith(f"02:30 {REPEAT_BERLIN}; {reason}")
        if ambiguous != "both":
            assert row[4].endswith(f"as dstPolicy.ambiguous is {ambiguous}")


def test_elapsed_time_expressions_say_why_they_repeat() -> None:
    fall = rows("30 * * * *", BERLIN, "2026-10-25 00:00", 2, DstPolicy("skip", "second"))
    assert fall == [
        (
            "10-25 00:30:00",
            "02:30:00",
            True,
            "repeated",
            f"02:30 {REPEAT_BERLIN}; the hour field '*' follows the clock, so it fires at both: "
            "this is its first occurrence (02:30 CEST)",
        ),
        (
            "10-25 01:30:00",
            "02:30:00",
            True,
            "repeated",
            f"02:30 {REPEAT_BERLIN}; the hour field '*' follows the clock, so it fires at both: "
            "this is its second occurrence (02:30 CET)",
        ),
    ]
    # A time inside the gap never shows on the clock: no row, real time runs on without a hole
    # (01:30 CET, then 03:30 CEST one hour later), whatever the policy.
    for policy in (DEFAULT_DST_POLICY, DstPolicy("skip")):
        spring = rows("30 * * * *", BERLIN, "2026-03-29 00:00", 2, policy)
        assert spring == [
            ("03-29 00:30:00", "01:30:00", True, None, None),
            ("03-29 01:30:00", "03:30:00", True, None, None),
        ]


def test_half_hour_shifts_and_other_zones() -> None:
    (skipped, _) = rows("15 2 * * *", LORD_HOWE, "2026-10-03 12:00", 1, DstPolicy("skip"))
    assert skipped[:4] == ("10-03 15:30:00", "02:15:00", False, "skipped")
    assert skipped[4] == (
        "02:15 does not exist on 2026-10-04 in Australia/Lord_Howe (clocks jump 02:00→02:30); "
        "not fired, as dstPolicy.nonexistent is skip"
    )
    first, second = rows(
        "45 1 * * *", LORD_HOWE, "2026-04-04 12:00", 2, DstPolicy(ambiguous="both")
    )
    assert first[0] == "04-04 14:45:00" and second[0] == "04-04 15:15:00"
    assert second[4] == (
        "01:45 occurs twice on 2026-04-05 in Australia/Lord_Howe (clocks go back 02:00→01:30); "
        "fired at both, as dstPolicy.ambiguous is both: this is its second occurrence (01:45 +1030)"
    )
    (_, second, _) = rows(
        "30 1 * * *", NEW_YORK, "2026-10-31 12:00", 2, DstPolicy(ambiguous="second")
    )
    assert second[4] == (
        "01:30 occurs twice on 2026-11-01 in America/New_York (clocks go back 02:00→01:00); "
        "fired at its second occurrence (01:30 EST) only, as dstPolicy.ambiguous is second"
    )
    (havana, _) = rows("@midnight", "America/Havana", "2026-03-07 12:00", 2)
    assert (
        havana[3] == "shifted" and "(clocks jump 00:00→01:00); fired at 01:00 instead" in havana[4]
    )


def test_ordinary_times_and_zones_without_dst_have_no_mark() -> None:
    result = preview("30 2 * * *", "Asia/Tokyo", at("2026-03-28 00:00"), 3)
    assert [(r.fires, r.dst, r.reason) for r in result] == [(True, None, None)] * 3
    assert [r.at for r in result] == next_fire_times(
        "30 2 * * *", "Asia/Tokyo", at("2026-03-28 00:00"), 3
    )
    assert preview("30 2 * * *", BERLIN, at("2026-03-28 00:00"), 0) == []


def test_count_counts_fire_times_and_skipped_rows_come_in_between() -> None:
    result = preview("30 2 * * *", BERLIN, at("2026-10-24 12:00"), 1, DstPolicy(ambiguous="second"))
    assert [(r.fires, r.dst) for r in result] == [(False, "skipped"), (True, "second")]
    # Nothing after the last fire time, even a skipped row at a later instant.
    result = preview("30 2 * * *", BERLIN, at("2026-10-24 12:00"), 1)
    assert [(r.fires, r.dst) for r in result] == [(True, "first")]


def test_a_row_as_a_document() -> None:
    (row, _) = preview("30 2 * * *", BERLIN, at("2026-03-28 12:00"), 2)
    assert isinstance(row, FirePreview)
    assert row.to_document() == {
        "at": "2026-03-29T01:00:00Z",
        "local": "2026-03-29T03:00:00+02:00",
        "wall": "2026-03-29T02:30:00",
        "fires": True,
        "dst": "shifted",
        "reason": f"02:30 {GAP_BERLIN}; fired at 03:00 instead",
    }


@pytest.mark.parametrize(
    ("expression", "zone", "after", "policy"),
    [
        ("0,30 2,3 * * *", BERLIN, "2026-03-28 12:00", DstPolicy("skip")),
        ("0,30 2,3 * * *", BERLIN, "2026-03-28 12:00", DEFAULT_DST_POLICY),
        ("*/20 2 * * *", BERLIN, "2026-10-24 12:00", DstPolicy(ambiguous="second")),
        ("*/20 1,2 * * *", NEW_YORK, "2026-10-31 12:00", DstPolicy("skip", "both")),
        ("*/15 * * * *", LORD_HOWE, "2026-04-04 12:00", DEFAULT_DST_POLICY),
        ("0 15,45 1,2 * * *", LORD_HOWE, "2026-10-03 12:00", DstPolicy("skip")),
    ],
)
def test_paging_from_the_last_row_gives_the_same_rows(
    expression: str, zone: str, after: str, policy: DstPolicy
) -> None:
    # The service reads its schedule in chunks, each starting after the last row of the one
    # before: nothing may be lost or repeated at the seams.
    whole = preview(expression, zone, at(after), 24, policy)
    pages: list[FirePreview] = []
    cursor = at(after)
    while sum(row.fires for row in pages) < 24:
        page = preview(expression, zone, cursor, 1, policy)
        pages += page
        cursor = page[-1].at
    assert pages == whole
