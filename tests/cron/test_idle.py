"""An idle Cron Service sleeps until its next job is due instead of polling, and a change to a
job wakes it sooner; a lost wake-up costs at most ``max_sleep``. Both backends; the due times
come from the fake clock, the wake-ups are awaited as events (nothing here sleeps for them)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from tests.cron.helpers import CronRig, keys_of
from tests.factories import T0
from tickwheel.cron.service import CronService
from tickwheel.store.cron_protocol import CronStore
from tickwheel.store.factory import open_store
from tickwheel.store.protocol import Store

HOUR = 3600.0


@pytest.fixture
async def rig(store: Store) -> CronRig:
    rig = CronRig(store, T0)
    await rig.register()
    rig.service = rig.make_service("svc-1", max_sleep=HOUR)
    return rig


async def idle_round(service: CronService) -> float:
    """One round that finds nothing to claim; the sleep it chose."""
    assert await service.run_once() == 0
    return service.sleep


async def test_it_sleeps_until_the_next_occurrence_less_the_lead(rig: CronRig) -> None:
    await rig.create(expression="* * * * *")  # created at 12:00, next run 12:01
    assert await rig.tick() == 1  # 12:01 materialised (lead 60 s); next run 12:02
    assert await idle_round(rig.service) == 60.0  # 12:02 - 60 s - 12:00
    rig.clock.advance(15)
    assert await idle_round(rig.service) == 45.0
    rig.clock.advance(45)
    assert await rig.tick() == 1  # due exactly when it said


async def test_the_sleep_is_bounded_and_never_a_spin(rig: CronRig) -> None:
    assert await idle_round(rig.service) == HOUR  # no job at all
    await rig.create(expression="0 3 * * *")  # next run tomorrow 03:00
    await rig.tick()
    capped = rig.make_service("svc-2", max_sleep=30.0)
    assert await idle_round(capped) == 30.0
    paused = await rig.create(name="paused", expression="* * * * *")
    await rig.jobs.cron_pause(paused["name"])
    assert await idle_round(rig.service) > 30.0  # a paused job is never due


async def test_jobs_due_only_at_their_occurrence_and_claims_of_others(rig: CronRig) -> None:
    await rig.create(expression="* * * * *", overlapPolicy="forbid")
    # Not claimed a lead ahead: due at 12:01 itself.
    assert await idle_round(rig.service) == 60.0
    rig.clock.advance(60)
    other = rig.make_service("svc-2", max_sleep=HOUR)
    claim = await rig.cron.cron_job_claim_due(
        other.owner, 10, other.lead, other.lease, None, rig.clock.now()
    )
    assert len(claim.jobs) == 1  # held by another instance (which died): 30 s of lease
    assert await idle_round(rig.service) == 30.0
    rig.clock.advance(30)
    assert await rig.tick() == 1


async def run_until(service: CronService, rounds: int) -> None:
    await asyncio.wait_for(service.wait_rounds(rounds), 10)


async def materialised(rig: CronRig, service: CronService, job: dict[str, Any], count: int) -> None:
    """Round after round (each one awaited, none slept for) until ``count`` executions of
    ``job`` exist; a service that stayed asleep fails it by the timeout."""
    while len(keys_of(await rig.executions(), job)) < count:
        await run_until(service, service.rounds + 1)


async def test_a_new_or_resumed_job_wakes_a_sleeping_service(rig: CronRig) -> None:
    task = asyncio.create_task(rig.service.run())
    try:
        await run_until(rig.service, 1)
        assert rig.service.sleep == HOUR  # nothing to do: asleep for an hour
        job = await rig.create(expression="* * * * *")
        await run_until(rig.service, 3)  # woken: one round claims the job, one finds no more
        assert keys_of(await rig.executions(), job) == ["2026-03-01T12:01:00Z"]
        await rig.jobs.cron_pause(job["name"])
        rig.clock.advance(5 * 60)
        await rig.jobs.cron_resume(job["name"], False)
        await materialised(rig, rig.service, job, 3)
        # 12:05 (late, within the grace) and 12:06 (a lead ahead), both at once.
        assert keys_of(await rig.executions(), job) == [
            "2026-03-01T12:01:00Z", "2026-03-01T12:05:00Z", "2026-03-01T12:06:00Z"
        ]  # fmt: skip
    finally:
        rig.service.stop()
        await asyncio.wait_for(task, 5)  # stop ends the hour's sleep at once


class Deaf:
    """A cron store whose wake-ups are all lost."""

    def __init__(self, inner: CronStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def cron_wait(self, timeout: float) -> bool:
        await asyncio.sleep(timeout)
        return False


async def test_a_lost_wake_up_costs_at_most_max_sleep(rig: CronRig) -> None:
    deaf = rig.make_service("deaf", Deaf(rig.cron), max_sleep=0.1)  # type: ignore[arg-type]
    task = asyncio.create_task(deaf.run())
    try:
        await run_until(deaf, 1)
        job = await rig.create(expression="* * * * *")
        await run_until(deaf, 3)
        assert keys_of(await rig.executions(), job) == ["2026-03-01T12:01:00Z"]
    finally:
        deaf.stop()
        await asyncio.wait_for(task, 5)


@pytest.mark.postgres
async def test_a_change_made_by_another_process_wakes_it_on_postgres(
    rig: CronRig, request: pytest.FixtureRequest
) -> None:
    if rig.store.dialect != "postgresql":
        pytest.skip("SQLite wakes only its own process")
    task = asyncio.create_task(rig.service.run())
    elsewhere = await open_store(request.getfixturevalue("pg_url"))
    try:
        await run_until(rig.service, 1)
        assert await rig.store.listen(5)  # the service's first sleep started listening
        other = CronRig(elsewhere, T0)  # its own pool and LISTEN connection: another process
        job = await other.create(expression="* * * * *")
        await run_until(rig.service, 3)
        assert keys_of(await rig.executions(), job) == ["2026-03-01T12:01:00Z"]
    finally:
        rig.service.stop()
        await asyncio.wait_for(task, 5)
        await elsewhere.close()


async def test_the_next_due_time_and_the_claim_agree_at_the_boundary(rig: CronRig) -> None:
    """The two queries agree at the boundary: due in 0 s means the claim takes it."""
    await rig.create(expression="* * * * *", overlapPolicy="forbid")
    wait = await rig.cron.cron_job_next_due(timedelta(seconds=60), None, rig.clock.now())
    assert wait == timedelta(seconds=60)
    rig.clock.advance(60)
    wait = await rig.cron.cron_job_next_due(timedelta(seconds=60), None, rig.clock.now())
    assert wait == timedelta(0)
    assert await rig.tick() == 1
