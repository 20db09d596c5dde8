"""A Cron Service that falls behind: a tick planned in time whose submissions come too late.
Whatever made it late (here an API that takes 150 s to answer, on the fake clock), an
occurrence materialised more than the misfire grace after it follows the misfire policy, and
its history row says the service fell behind."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tests.cron.helpers import CronRig, keys_of
from tests.factories import T0
from tickwheel.domain.submission import SubmitRequest
from tickwheel.store.protocol import Store

SLOW = 150.0
"""Seconds the first submission takes: 12:01 is then 90 s late, past the 60 s grace."""
BEHIND = "the service fell behind: 2 min between claiming the job and submitting it"


@pytest.fixture
async def rig(store: Store) -> CronRig:
    rig = CronRig(store, T0)
    await rig.register()
    return rig


def slow_first_call(rig: CronRig, method: str) -> list[Any]:
    """Makes the client's first ``method`` call take ``SLOW`` seconds; returns what it got."""
    inner = getattr(rig.client, method)
    first: list[Any] = []

    async def slow(*args: Any, **kwargs: Any) -> Any:
        result = await inner(*args, **kwargs)
        if not first:
            first.append(args[0])
            rig.clock.advance(SLOW)
        return result

    setattr(rig.client, method, slow)
    return first


@pytest.mark.parametrize(
    ("policy", "outcome", "says"),
    [
        ("skip", "SKIPPED_MISFIRE", "not run (misfirePolicy skip)"),
        ("run_once", "SUBMITTED", "run once now for the missed occurrences"),
        ("catch_up", "SUBMITTED", "caught up late (misfirePolicy catch_up)"),
    ],
)
async def test_occurrences_submitted_past_the_grace_follow_the_misfire_policy(
    rig: CronRig, policy: str, outcome: str, says: str
) -> None:
    jobs = [
        await rig.create(name=f"job-{i}", expression="* * * * *", misfirePolicy=policy)
        for i in range(3)
    ]
    rig.service.submit_chunk = 1  # one job per submit_many: the clock is read before each
    first = slow_first_call(rig, "submit_many")
    await rig.tick()  # claims all three at 12:00 (a lead ahead of 12:01); the first is slow
    requests: Sequence[SubmitRequest] = first[0]
    on_time = {r.idempotency_key for r in requests}
    assert len(on_time) == 1
    executions = await rig.executions()
    for job in jobs:
        history = {r["occurrence"]: r for r in await rig.history(job["name"])}
        row = history["2026-03-01T12:01:00Z"]
        key = f"cron:{job['cronJobId']}:2026-03-01T12:01:00Z"
        if key in on_time:  # submitted a minute early: an ordinary run
            assert row["outcome"] == "SUBMITTED" and row["reason"] is None
            continue
        # Submitted at 12:02:30 it would have been created 90 s after its occurrence.
        assert row["outcome"] == outcome
        assert says in row["reason"]
        assert BEHIND in row["reason"]
        assert (key in executions) is (outcome == "SUBMITTED")
        # 12:02 was 30 s late, within the grace: it runs as usual.
        assert history["2026-03-01T12:02:00Z"]["outcome"] == "SUBMITTED"
        assert "2026-03-01T12:02:00Z" in keys_of(executions, job)


async def test_an_overlap_checked_job_behind_a_slow_one_is_skipped_as_a_misfire(
    rig: CronRig,
) -> None:
    """Jobs that forbid overlap are submitted one by one at their occurrence: the second
    waits for the first's slow submission and is then past the grace."""
    jobs = [
        await rig.create(
            name=f"job-{i}", expression="* * * * *", overlapPolicy="forbid", misfirePolicy="skip"
        )
        for i in range(2)
    ]
    rig.clock.advance(60)  # 12:01: both due now
    slow_first_call(rig, "submit")
    await rig.tick()
    rows = [
        {r["occurrence"]: r for r in await rig.history(job["name"])}["2026-03-01T12:01:00Z"]
        for job in jobs
    ]
    assert sorted(r["outcome"] for r in rows) == ["SKIPPED_MISFIRE", "SUBMITTED"]
    [skipped] = [r for r in rows if r["outcome"] == "SKIPPED_MISFIRE"]
    assert BEHIND in skipped["reason"]
    assert len(await rig.executions()) == 1 + 1  # the first job's 12:01, then its 12:03
