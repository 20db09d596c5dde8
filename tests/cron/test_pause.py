"""Pausing a cron job cancels the occurrences it already materialised and that have not
started, records them, and a resume never brings them back twice (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest

from tests.cron.helpers import ALL_SHARDS, TENANT, CronRig, keys_of
from tests.factories import T0
from tickwheel.client.client import AsyncClient
from tickwheel.client.models import BatchItemResult
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.cron.service import CronService
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.domain.submission import SubmitRequest
from tickwheel.services.settings import CronSettings
from tickwheel.store.protocol import AttemptResult, Store

EVERY_10S = "*/10 * * * * *"


@pytest.fixture
async def rig(store: Store) -> CronRig:
    rig = CronRig(store, T0)
    await rig.register()
    return rig


def at(seconds: int) -> str:
    instant = T0 + timedelta(seconds=seconds)
    return instant.isoformat().replace("+00:00", "Z")


async def statuses(rig: CronRig, job: dict[str, object]) -> dict[str, str]:
    prefix = f"cron:{job['cronJobId']}:"
    return {
        key.removeprefix(prefix): str(e.status)
        for key, e in (await rig.executions()).items()
        if key.startswith(prefix)
    }


async def test_pause_cancels_what_was_materialised_and_has_not_started(rig: CronRig) -> None:
    job = await rig.create(name="every-10s", expression=EVERY_10S)
    await rig.tick()  # 12:00:10 .. 12:01:00 materialised, a lead ahead
    rig.clock.advance(20)  # 12:00:20: the first two are due
    running = (await rig.executions())[f"cron:{job['cronJobId']}:{at(10)}"]
    await rig.start(running.execution_id)  # 12:00:10 runs; 12:00:20 is READY
    before = await statuses(rig, job)
    assert before[at(10)] == "RUNNING" and before[at(20)] == "READY"
    assert {before[at(s)] for s in range(30, 61, 10)} == {"SCHEDULED"}

    paused = await rig.jobs.cron_pause("every-10s")

    assert paused["status"] == "PAUSED"
    after = await statuses(rig, job)
    assert after[at(10)] == "RUNNING", "a run already under way is not stopped by a pause"
    assert {after[at(s)] for s in range(20, 61, 10)} == {"CANCELLED"}
    history = await rig.history("every-10s")
    paused_rows = [r for r in history if r["outcome"] == "SKIPPED_PAUSED"]
    assert [r["occurrence"] for r in paused_rows] == [at(s) for s in range(20, 61, 10)]
    for row in paused_rows:
        assert row["executionId"] == str(
            (await rig.executions())[f"cron:{job['cronJobId']}:{row['occurrence']}"].execution_id
        )
        assert row["executionStatus"] == "CANCELLED"
        assert "paused before this occurrence started" in row["reason"]
    assert "then READY" in paused_rows[0]["reason"]
    assert "then SCHEDULED" in paused_rows[1]["reason"]
    # Nothing of the job runs while it is paused: the scheduler finds nothing more to promote.
    rig.clock.advance(120)
    await rig.tick()
    await rig.store.execution_promote_due(ALL_SHARDS, 1000, rig.clock.now())
    assert (await statuses(rig, job)) == after


async def test_only_that_jobs_occurrences_in_its_tenant_are_cancelled(rig: CronRig) -> None:
    job = await rig.create(name="every-10s", expression=EVERY_10S)
    other = await rig.create(name="other", expression=EVERY_10S)
    await rig.tick()
    # The same key in another tenant, and a key of this tenant that is not an occurrence.
    globex = AsyncClient(transport=InProcessTransport(rig.store, "globex", rig.clock))
    theirs = await globex.submit(
        "greet", {"name": "G"}, T0 + timedelta(seconds=30), f"cron:{job['cronJobId']}:{at(30)}"
    )
    by_hand = await rig.client.submit(
        "greet", {"name": "H"}, T0 + timedelta(seconds=30), f"cron:{job['cronJobId']}:by-hand"
    )

    await rig.jobs.cron_pause("every-10s")

    mine = await statuses(rig, job)
    assert mine.pop("by-hand") == "SCHEDULED"
    assert set(mine.values()) == {"CANCELLED"} and len(mine) == 6
    assert set((await statuses(rig, other)).values()) == {"SCHEDULED"}
    assert (await globex.get(theirs.execution_id)).status is ExecutionStatus.SCHEDULED
    assert (await rig.client.get(by_hand.execution_id)).status is ExecutionStatus.SCHEDULED
    assert all(o == "SUBMITTED" for _, o in await rig.outcomes("other"))


@pytest.mark.parametrize("catch_up", [False, True])
async def test_resume_never_materialises_a_cancelled_occurrence_again(
    rig: CronRig, catch_up: bool
) -> None:
    job = await rig.create(
        name="every-10s", expression=EVERY_10S, misfirePolicy="catch_up", maxCatchUp=100
    )
    await rig.tick()  # 12:00:10 .. 12:01:00
    await rig.jobs.cron_pause("every-10s")
    cancelled = await statuses(rig, job)
    assert set(cancelled.values()) == {"CANCELLED"} and len(cancelled) == 6
    rig.clock.advance(125)  # 12:02:05

    await rig.jobs.cron_resume("every-10s", catch_up=catch_up)
    for _ in range(3):
        await rig.advance(10)

    now = await statuses(rig, job)
    for occurrence, status in cancelled.items():
        assert now[occurrence] == status == "CANCELLED"
    history = await rig.history("every-10s")
    for occurrence in cancelled:
        rows = [r["outcome"] for r in history if r["occurrence"] == occurrence]
        assert sorted(rows) == ["SKIPPED_PAUSED", "SUBMITTED"], (occurrence, rows)
    # What was never materialised follows the resume's rule; then the job goes on as before.
    missed = [at(s) for s in range(70, 121, 10)]
    if catch_up:
        assert all(now[m] == "SCHEDULED" or now[m] == "READY" for m in missed)
    else:
        assert not any(m in now for m in missed)
        assert {r["outcome"] for r in history if r["occurrence"] in missed} == {"SKIPPED_PAUSED"}
    assert now[at(180)] == "SCHEDULED"
    assert len(keys_of(await rig.executions(), job)) == len(now)


async def test_a_pause_again_cancels_a_straggler_and_records_nothing_twice(rig: CronRig) -> None:
    """A tick that was under way when the job was paused may still submit an occurrence; a
    second pause (it is idempotent) cancels it, and each history row exists once."""
    job = await rig.create(name="every-10s", expression=EVERY_10S)
    await rig.tick()
    await rig.jobs.cron_pause("every-10s")
    late = await rig.client.submit(
        "greet", {"name": "Ada"}, T0 + timedelta(seconds=70), f"cron:{job['cronJobId']}:{at(70)}"
    )
    again = await rig.jobs.cron_pause("every-10s")
    assert again["status"] == "PAUSED"
    assert (await rig.client.get(late.execution_id)).status is ExecutionStatus.CANCELLED
    outcomes = await rig.outcomes("every-10s")
    assert len(outcomes) == len(set(outcomes))
    assert (at(70), "SKIPPED_PAUSED") in outcomes
    audit = await rig.jobs.cron_audit("every-10s")
    assert [e["action"] for e in audit["items"]].count("paused") == 1


async def test_an_occurrence_waiting_to_retry_has_started_and_is_not_cancelled(
    rig: CronRig,
) -> None:
    """RETRY_WAIT means an attempt ran: the guarded cancel of a pause leaves it alone (a plain
    cancel would not)."""
    job = await rig.create(name="every-10s", expression=EVERY_10S)
    await rig.tick()
    rig.clock.advance(10)
    first = (await rig.executions())[f"cron:{job['cronJobId']}:{at(10)}"]
    token = await rig.start(first.execution_id)
    failed = AttemptResult(
        first.execution_id,
        token,
        AttemptStatus.FAILED,
        ExecutionStatus.RETRY_WAIT,
        error={"message": "boom"},
        next_attempt_at=rig.clock.now() + timedelta(seconds=30),
    )
    assert await rig.store.attempt_finish(failed, rig.clock.now())

    await rig.jobs.cron_pause("every-10s")

    assert (await rig.client.get(first.execution_id)).status is ExecutionStatus.RETRY_WAIT
    assert (at(10), "SKIPPED_PAUSED") not in await rig.outcomes("every-10s")
    assert await rig.store.execution_cancel_unstarted(TENANT, first.execution_id, T0) is None


async def test_deleting_a_job_cancels_what_it_materialised_too(rig: CronRig) -> None:
    job = await rig.create(name="every-10s", expression=EVERY_10S)
    await rig.tick()
    assert set((await statuses(rig, job)).values()) == {"SCHEDULED"}

    await rig.jobs.cron_delete("every-10s")

    assert set((await statuses(rig, job)).values()) == {"CANCELLED"}
    rig.clock.advance(120)
    await rig.tick()
    assert len(await statuses(rig, job)) == 6


class PausingTransport(InProcessTransport):
    """Pauses the job just before the tick's submissions reach the store: the pause's sweep
    runs while the tick holds its claim and has submitted nothing yet."""

    def __init__(self, rig: CronRig, name: str, *, delete: bool = False) -> None:
        super().__init__(rig.store, TENANT, rig.clock)
        self.rig, self.name, self.delete, self.done = rig, name, delete, False

    async def submit_many_models(
        self, requests: Sequence[SubmitRequest], *, bare_names: bool = False
    ) -> list[BatchItemResult]:
        # What the SDK calls on an in-process transport (it takes the models, not the JSON).
        if not self.done:
            self.done = True
            if self.delete:
                await self.rig.jobs.cron_delete(self.name)
            else:
                await self.rig.jobs.cron_pause(self.name)
        return await super().submit_many_models(requests, bare_names=bare_names)


@pytest.mark.parametrize("delete", [False, True])
async def test_a_tick_under_way_when_the_pause_lands_cancels_what_it_submitted(
    rig: CronRig, delete: bool
) -> None:
    job = await rig.create(name="every-10s", expression=EVERY_10S)
    racing = AsyncClient(transport=PausingTransport(rig, "every-10s", delete=delete))
    service = CronService(
        rig.cron,
        lambda tenant: racing,
        clock=rig.clock,
        owner="slow",
        settings=CronSettings(lead=timedelta(seconds=60)),
    )

    assert await service.run_once() == 0  # its advance lost to the pause

    made = await statuses(rig, job)
    assert len(made) == 6 and set(made.values()) == {"CANCELLED"}
    if not delete:
        outcomes = await rig.outcomes("every-10s")
        assert [o for _, o in outcomes].count("SKIPPED_PAUSED") == 6
        assert (await rig.jobs.cron_get("every-10s"))["status"] == "PAUSED"
