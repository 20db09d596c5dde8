"""Daylight saving end to end through the service: ``0 2 * * *`` in Europe/Berlin across
2026-03-29 (02:00 CET -> 03:00 CEST) and 2026-10-25 (03:00 CEST -> 02:00 CET) fires once a day
with the right ``executeAt``, and the history says what the DST rule did."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.cron.helpers import CronRig, keys_of
from tickwheel.domain.cron_dst import DstPolicy
from tickwheel.domain.errors import InvalidInput
from tickwheel.store.protocol import Store

HALF_HOUR = 1800.0


async def run_until(
    store: Store, start: datetime, until: datetime, **doc: object
) -> tuple[CronRig, dict[str, object]]:
    """Creates the job at ``start`` and ticks every half hour for ``days`` days: the way the
    service runs, never more than the lead (60 s) ahead and never a misfire."""
    rig = CronRig(store, start)
    if await store.definition_get("", "greet") is None:
        await rig.register()
    job = await rig.create(expression="0 2 * * *", timezone="Europe/Berlin", **doc)
    while rig.clock.now() < until:
        await rig.advance(HALF_HOUR)
    return rig, job


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


async def test_spring_forward_fires_once_at_the_end_of_the_gap(store: Store) -> None:
    rig, job = await run_until(store, utc("2026-03-27T00:00:30"), utc("2026-03-30T12:00"))
    assert await rig.execute_ats() == [
        utc("2026-03-27T01:00"),  # 02:00 CET
        utc("2026-03-28T01:00"),  # 02:00 CET
        utc("2026-03-29T01:00"),  # 02:00 does not exist: 03:00 CEST, the end of the gap
        utc("2026-03-30T00:00"),  # 02:00 CEST
    ]
    history = {r["occurrence"]: r for r in await rig.history(str(job["name"]))}
    moved = history["2026-03-29T01:00:00Z"]
    assert moved["outcome"] == "SUBMITTED"
    assert "does not exist" in moved["reason"] and "03:00" in moved["reason"]
    assert history["2026-03-28T01:00:00Z"]["reason"] is None


async def test_fall_back_fires_once_at_the_first_occurrence(store: Store) -> None:
    rig, job = await run_until(store, utc("2026-10-22T23:00:30"), utc("2026-10-26T12:00"))
    assert await rig.execute_ats() == [
        utc("2026-10-23T00:00"),  # 02:00 CEST
        utc("2026-10-24T00:00"),
        utc("2026-10-25T00:00"),  # 02:00 occurs twice: the first, CEST
        utc("2026-10-26T01:00"),  # 02:00 CET
    ]
    history = {r["occurrence"]: r for r in await rig.history(str(job["name"]))}
    assert "occurs twice" in history["2026-10-25T00:00:00Z"]["reason"]
    # The second 02:00 (CET) is not run, and the history says why.
    second = history["2026-10-25T01:00:00Z"]
    assert second["outcome"] == "SKIPPED_DST" and "dstPolicy.ambiguous is first" in second["reason"]
    assert len(history) == 5


async def test_dst_policy_skip_and_both_are_recorded(store: Store) -> None:
    rig, job = await run_until(
        store,
        utc("2026-03-28T00:00:30"),
        utc("2026-03-30T12:00"),
        dstPolicy={"nonexistent": "skip"},
    )
    assert await rig.execute_ats() == [utc("2026-03-28T01:00"), utc("2026-03-30T00:00")]
    skipped = [r for r in await rig.history(str(job["name"])) if r["outcome"] == "SKIPPED_DST"]
    assert len(skipped) == 1 and "dstPolicy.nonexistent is skip" in skipped[0]["reason"]
    assert skipped[0]["executionId"] is None

    rig2, job2 = await run_until(
        store,
        utc("2026-10-23T23:00:30"),
        utc("2026-10-25T12:00"),
        name="both",
        dstPolicy={"ambiguous": "both"},
    )
    assert keys_of(await rig2.executions(), job2) == [
        "2026-10-24T00:00:00Z",
        "2026-10-25T00:00:00Z",
        "2026-10-25T01:00:00Z",  # 02:00 CET, the second 02:00
    ]


@pytest.mark.parametrize(
    ("midnight", "hours"),
    [("2026-03-29T00:00:00+01:00", 23), ("2026-10-25T00:00:00+02:00", 25)],
)
async def test_hourly_follows_elapsed_time(store: Store, midnight: str, hours: int) -> None:
    """``0 * * * *`` fires every real hour: 23 times on the short day, 25 on the long one."""
    start = datetime.fromisoformat(midnight).astimezone(UTC)
    rig = CronRig(store, start - timedelta(seconds=30))
    await rig.register()
    job = await rig.create(expression="0 * * * *", timezone="Europe/Berlin", name="hourly")
    for _ in range(hours * 2 + 2):
        await rig.advance(HALF_HOUR)
    end = start + timedelta(hours=hours)  # the next local midnight
    instants = [utc(k[:-1]) for k in keys_of(await rig.executions(), job)]
    day = [i for i in instants if start <= i < end]
    assert day == [start + timedelta(hours=h) for h in range(hours)]


def test_a_stored_dst_policy_is_read_once_per_combination_and_still_checked() -> None:
    document = {"nonexistent": "skip", "ambiguous": "both"}
    first = DstPolicy.from_stored(document)
    assert first == DstPolicy(nonexistent="skip", ambiguous="both")
    assert DstPolicy.from_stored(dict(document)) is first  # shared: a claim reads 500 rows
    assert DstPolicy.from_stored(None) == DstPolicy()
    assert DstPolicy.from_stored({"ambiguous": "second"}) == DstPolicy(ambiguous="second")
    with pytest.raises(InvalidInput):
        DstPolicy.from_stored({"nonexistent": "later", "ambiguous": "both"})
    with pytest.raises(InvalidInput):
        DstPolicy.from_stored({"nonexistent": ["skip"], "ambiguous": "both"})
