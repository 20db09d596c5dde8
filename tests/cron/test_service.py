"""The Cron Service end to end on a real store (SQLite and PostgreSQL) with a fake clock: each
occurrence becomes exactly one execution, and every one that does not says why."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.cron.helpers import CronRig, keys_of
from tests.factories import T0
from tickwheel.cron import policies
from tickwheel.cron.service import CronService
from tickwheel.observability.metrics import Metrics
from tickwheel.store.cron_protocol import CronAdvance, CronStore
from tickwheel.store.protocol import Store

MINUTE = 60.0


@pytest.fixture
async def rig(store: Store) -> CronRig:
    rig = CronRig(store, T0)
    await rig.register()
    return rig


def minutes(*values: int, hour: int = 12) -> list[str]:
    return [f"2026-03-01T{hour}:{m:02}:00Z" for m in values]


async def test_each_occurrence_becomes_one_execution_a_lead_ahead(rig: CronRig) -> None:
    job = await rig.create(expression="* * * * *")
    assert job["nextRunAt"] == "2026-03-01T12:01:00Z"
    assert job["definitionVersionPolicy"] == "latest"
    assert await rig.tick() == 1
    [execution] = (await rig.executions()).values()
    assert execution.idempotency_key == f"cron:{job['cronJobId']}:2026-03-01T12:01:00Z"
    assert execution.execute_at == T0 + timedelta(minutes=1)
    assert str(execution.status) == "SCHEDULED"
    assert await rig.tick() == 0  # nothing more is due: the next is more than the lead away
    for _ in range(5):
        await rig.advance(MINUTE)
    assert keys_of(await rig.executions(), job) == minutes(1, 2, 3, 4, 5, 6)
    got = await rig.jobs.cron_get(job["cronJobId"])
    assert got["nextRunAt"] == "2026-03-01T12:07:00Z"
    assert got["lastOccurrence"] == "2026-03-01T12:06:00Z"
    history = await rig.history(job["cronJobId"])
    assert [r["outcome"] for r in history] == ["SUBMITTED"] * 6
    assert all(r["executionStatus"] == "SCHEDULED" for r in history)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("skip", ["SKIPPED_MISFIRE"] * 8 + ["SUBMITTED"] * 3),
        ("run_once", ["COALESCED"] * 7 + ["SUBMITTED"] * 4),
        ("catch_up", ["SKIPPED_MISFIRE"] * 5 + ["SUBMITTED"] * 6),
    ],
)
async def test_misfire_policies_after_an_outage(
    rig: CronRig, policy: str, expected: list[str]
) -> None:
    """Created at 12:00, the service then down until 12:10: 12:01-12:08 are more than the
    60 s grace late (missed), 12:09 is late but within it, 12:10 and 12:11 are on time."""
    job = await rig.create(expression="* * * * *", misfirePolicy=policy, maxCatchUp=3)
    rig.service.metrics = metrics = Metrics()
    rig.clock.advance(10 * MINUTE)
    await rig.tick()
    for outcome in set(expected):  # counted in /metrics by outcome
        sample = metrics.registry.get_sample_value(
            "tickwheel_cron_occurrences_total", {"outcome": outcome.lower()}
        )
        assert sample == expected.count(outcome)
    assert await rig.outcomes(job["name"]) == list(
        zip(minutes(*range(1, 12)), expected, strict=True)
    )
    submitted = [o for o, outcome in await rig.outcomes(job["name"]) if outcome == "SUBMITTED"]
    assert keys_of(await rig.executions(), job) == submitted
    history = {r["occurrence"]: r for r in await rig.history(job["name"])}
    if policy != "skip":
        first_run = history[submitted[0]]
        assert f"misfirePolicy {policy}" in first_run["reason"]
        assert "missed by" in first_run["reason"]
    dropped = history["2026-03-01T12:01:00Z"]["reason"]
    assert f"misfirePolicy {policy}" in dropped
    # A missed occurrence runs now, but keeps its own executeAt (within a day).
    executions = await rig.executions()
    assert (
        executions[f"cron:{job['cronJobId']}:{submitted[0]}"]
        .execute_at.isoformat()
        .startswith(submitted[0][:16])
    )


async def test_a_long_outage_lists_recent_misses_and_summarises_the_rest(rig: CronRig) -> None:
    job = await rig.create(expression="* * * * *")  # run_once
    rig.clock.advance(2 * 86400)
    await rig.tick()
    history = await rig.history(job["name"])
    summary = history[0]
    assert summary["occurrence"] == "2026-03-01T12:01:00Z"
    assert summary["outcome"] == "COALESCED"
    assert "too many to list one by one" in summary["reason"]
    coalesced = [r for r in history if r["outcome"] == "COALESCED"]
    assert len(coalesced) == 1 + policies.RECORD_LIMIT
    runs = [r for r in history if r["outcome"] == "SUBMITTED"]
    # The latest missed one (more than the grace ago) plus the on-time ones.
    assert [r["occurrence"][11:16] for r in runs] == ["11:58", "11:59", "12:00", "12:01"]
    late = (await rig.executions())[f"cron:{job['cronJobId']}:2026-03-03T11:58:00Z"]
    assert late.execute_at == datetime(2026, 3, 3, 11, 58, tzinfo=UTC)
    assert len(await rig.executions()) == len(runs)


async def test_overlap_forbid_skips_while_the_previous_run_is_unfinished(rig: CronRig) -> None:
    job = await rig.create(expression="* * * * *", overlapPolicy="forbid")
    assert await rig.tick() == 0  # overlap-checked jobs are not materialised ahead
    await rig.advance(MINUTE)
    [first] = (await rig.executions()).values()
    assert first.execute_at == T0 + timedelta(minutes=1)
    await rig.advance(MINUTE)  # 12:02: the 12:01 run is still READY
    await rig.finish(first.execution_id)
    await rig.advance(MINUTE)  # 12:03: it has finished
    assert await rig.outcomes(job["name"]) == [
        ("2026-03-01T12:01:00Z", "SUBMITTED"),
        ("2026-03-01T12:02:00Z", "SKIPPED_OVERLAP"),
        ("2026-03-01T12:03:00Z", "SUBMITTED"),
    ]
    skipped = (await rig.history(job["name"]))[1]
    assert (
        str(first.execution_id) in skipped["reason"] and "overlapPolicy forbid" in skipped["reason"]
    )
    assert skipped["executionId"] is None
    assert keys_of(await rig.executions(), job) == minutes(1, 3)


async def test_overlap_replace_cancels_a_run_that_has_not_started_and_stops_a_running_one(
    rig: CronRig,
) -> None:
    job = await rig.create(expression="* * * * *", overlapPolicy="replace")
    await rig.advance(MINUTE)
    await rig.advance(MINUTE)  # 12:02 replaces 12:01, which is still READY
    executions = await rig.executions()
    first = executions[f"cron:{job['cronJobId']}:2026-03-01T12:01:00Z"]
    second = executions[f"cron:{job['cronJobId']}:2026-03-01T12:02:00Z"]
    assert str(first.status) == "CANCELLED"
    await rig.start(second.execution_id)
    await rig.advance(MINUTE)  # 12:02 is RUNNING: its worker is asked to stop it
    third = (await rig.executions())[f"cron:{job['cronJobId']}:2026-03-01T12:03:00Z"]
    running = await rig.client.get(second.execution_id)
    assert str(running.status) == "RUNNING" and running.cancel_requested_at is not None
    assert str(third.status) == "READY"
    history = await rig.history(job["name"])
    assert [(r["occurrence"][11:16], r["outcome"]) for r in history] == [
        ("12:01", "SUBMITTED"),
        ("12:01", "REPLACED"),
        ("12:02", "SUBMITTED"),
        ("12:02", "REPLACED"),
        ("12:03", "SUBMITTED"),
    ]
    assert history[1]["executionStatus"] == "CANCELLED"
    assert "overlapPolicy replace" in history[1]["reason"]
    assert "stopped while RUNNING" in history[3]["reason"]


async def test_overlap_allow_runs_alongside(rig: CronRig) -> None:
    job = await rig.create(expression="* * * * *")
    for _ in range(3):
        await rig.advance(MINUTE)
    assert keys_of(await rig.executions(), job) == minutes(1, 2, 3, 4)


async def test_pause_then_resume_without_catch_up_skips_what_was_missed(rig: CronRig) -> None:
    job = await rig.create(expression="* * * * *")
    await rig.tick()  # 12:01 materialised before the pause: the pause cancels it
    rig.clock.advance(30)
    paused = await rig.jobs.cron_pause(job["name"])
    assert paused["status"] == "PAUSED" and paused["nextFireTimes"] == []
    for _ in range(10):
        await rig.advance(MINUTE)  # 12:10:30
    assert keys_of(await rig.executions(), job) == minutes(1)
    resumed = await rig.jobs.cron_resume(job["name"], catch_up=False)
    assert resumed["status"] == "ACTIVE" and resumed["nextRunAt"] == "2026-03-01T12:11:00Z"
    await rig.tick()
    outcomes = await rig.outcomes(job["name"])
    assert outcomes == [
        ("2026-03-01T12:01:00Z", "SUBMITTED"),
        ("2026-03-01T12:01:00Z", "SKIPPED_PAUSED"),
    ] + [(m, "SKIPPED_PAUSED") for m in minutes(*range(2, 11))] + [
        ("2026-03-01T12:11:00Z", "SUBMITTED")
    ]
    history = await rig.history(job["name"])
    assert "was cancelled" in history[1]["reason"] and history[1]["executionStatus"] == "CANCELLED"
    assert "resumed without catch-up" in history[2]["reason"]


async def test_pause_then_resume_with_catch_up_follows_the_misfire_policy(rig: CronRig) -> None:
    job = await rig.create(expression="* * * * *", misfirePolicy="catch_up", maxCatchUp=100)
    await rig.tick()
    rig.clock.advance(30)
    await rig.jobs.cron_pause(job["name"])
    rig.clock.advance(10 * MINUTE)  # 12:10:30
    await rig.tick()
    await rig.jobs.cron_resume(job["name"], catch_up=True)
    await rig.tick()
    assert keys_of(await rig.executions(), job) == minutes(*range(1, 12))
    outcomes = await rig.outcomes(job["name"])
    # 12:01 was materialised before the pause, which cancelled it; catch-up does not redo it.
    assert [o for m, o in outcomes if m == minutes(1)[0]] == ["SUBMITTED", "SKIPPED_PAUSED"]
    assert {o for m, o in outcomes if m != minutes(1)[0]} == {"SUBMITTED"}


async def test_resume_with_catch_up_and_run_once_coalesces(rig: CronRig) -> None:
    job = await rig.create(expression="* * * * *")
    await rig.jobs.cron_pause(job["name"])
    rig.clock.advance(10 * MINUTE + 30)
    await rig.jobs.cron_resume(job["name"], catch_up=True)
    await rig.tick()
    outcomes = dict(await rig.outcomes(job["name"]))
    assert [m for m, o in outcomes.items() if o == "COALESCED"] == minutes(*range(1, 9))
    assert keys_of(await rig.executions(), job) == minutes(9, 10, 11)


async def test_jitter_is_deterministic_and_keeps_the_key_unjittered(rig: CronRig) -> None:
    job = await rig.create(expression="* * * * *", jitter=30)
    for _ in range(4):
        await rig.advance(MINUTE)
    job_id = uuid.UUID(job["cronJobId"])
    offsets = []
    for key, execution in (await rig.executions()).items():
        occurrence = datetime.fromisoformat(key.split(":", 2)[2])
        delay = execution.execute_at - occurrence
        assert delay == policies.jitter(job_id, occurrence, 30)
        assert timedelta(0) <= delay < timedelta(seconds=30)
        offsets.append(delay)
    assert len(set(offsets)) > 1


async def test_bounds_start_late_and_stop_at_the_end(rig: CronRig) -> None:
    job = await rig.create(
        expression="* * * * *", startAt="2026-03-01T12:05:00Z", endAt="2026-03-01T12:07:30Z"
    )
    assert job["nextRunAt"] == "2026-03-01T12:05:00Z"
    for _ in range(10):
        await rig.advance(MINUTE)
    assert keys_of(await rig.executions(), job) == minutes(5, 6, 7)
    got = await rig.jobs.cron_get(job["name"])
    assert got["nextRunAt"] is None and got["nextFireTimes"] == []


async def test_a_refused_submission_is_recorded_and_the_job_moves_on(rig: CronRig) -> None:
    job = await rig.create(expression="* * * * *")  # latest version: resolved at each occurrence
    await rig.register(version=2, inputs={"name": "string", "city": "string"})  # city required
    await rig.advance(MINUTE)
    [row] = [r for r in await rig.history(job["name"]) if r["outcome"] == "FAILED"][:1]
    assert "inputs.city" in row["reason"]
    got = await rig.jobs.cron_get(job["name"])
    assert got["nextRunAt"] == "2026-03-01T12:03:00Z"


class Crashing:
    """A cron store whose advance dies like a killed process: after the submissions, before
    the history and the new next_run_at are written, and without releasing the claim."""

    def __init__(self, inner: CronStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def cron_job_advance(self, owner: str, advance: CronAdvance, now: Any = None) -> bool:
        raise KeyboardInterrupt("killed")

    async def cron_job_advance_many(self, owner: str, advances: Any, now: Any = None) -> Any:
        raise KeyboardInterrupt("killed")

    async def cron_job_release(self, owner: str, ids: Any) -> None:
        raise KeyboardInterrupt("killed")


async def test_a_crash_between_submit_and_advance_creates_nothing_new(rig: CronRig) -> None:
    job = await rig.create(expression="* * * * *", jitter=20)
    doomed = rig.make_service("doomed", Crashing(rig.cron))  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):
        await doomed.run_once()
    before = await rig.executions()
    assert keys_of(before, job) == minutes(1)
    assert await rig.history(job["name"]) == []
    # Its claim holds until the lease runs out; then another instance redoes the tick.
    assert await rig.tick() == 0
    rig.clock.advance(31)
    await rig.tick()
    after = await rig.executions()
    assert keys_of(after, job) == minutes(1)
    assert after == before  # the same execution, untouched
    [row] = await rig.history(job["name"])
    assert row["executionId"] == str(
        before[f"cron:{job['cronJobId']}:2026-03-01T12:01:00Z"].execution_id
    )


async def test_two_instances_share_the_work_and_each_occurrence_runs_once(rig: CronRig) -> None:
    jobs = [await rig.create(name=f"job-{i}", expression="* * * * *") for i in range(12)]
    other = rig.make_service("svc-2", batch=5)
    rig.service.batch = 5
    for _ in range(5):
        rig.clock.advance(MINUTE)
        await other.run_once()
        await rig.tick()
        await rig.tick(other)
    executions = await rig.executions()
    for job in jobs:
        assert keys_of(executions, job) == minutes(1, 2, 3, 4, 5, 6)
    assert rig.service.counts["SUBMITTED"] > 0 and other.counts["SUBMITTED"] > 0


async def test_an_edit_during_a_tick_wins_and_nothing_is_lost(rig: CronRig) -> None:
    job = await rig.create(expression="* * * * *")
    claim = await rig.cron.cron_job_claim_due(
        "slow", 10, timedelta(seconds=60), timedelta(seconds=30), now=rig.clock.now()
    )
    [claimed] = claim.jobs
    await rig.jobs.cron_update(job["name"], {"expression": "*/5 * * * *", "version": 1})
    late = CronAdvance(
        claimed.cron_job_id, claimed.version, claimed.next_run_at, T0 + timedelta(minutes=2)
    )
    assert not await rig.cron.cron_job_advance("slow", late, rig.clock.now())
    got = await rig.jobs.cron_get(job["name"])
    assert got["nextRunAt"] == "2026-03-01T12:05:00Z" and got["version"] == 2
    rig.clock.advance(4 * MINUTE)
    await rig.tick()
    assert keys_of(await rig.executions(), job) == minutes(5)


async def test_the_default_lead_materialises_the_next_minute_before_this_one_starts(
    rig: CronRig,
) -> None:
    """With a lead longer than the period (90 s for every-minute jobs), the herd of 12:02 is
    materialised at 12:00:30, half a minute before the herd of 12:01 starts, not at 12:01
    where it would compete with it."""
    service = rig.make_service(
        "default-lead", lead=CronService(rig.cron, lambda _: rig.client).lead
    )
    assert service.lead == timedelta(seconds=90)
    job = await rig.create(expression="* * * * *")
    await rig.tick(service)  # 12:00: 12:01 is within 90 s
    assert keys_of(await rig.executions(), job) == minutes(1)
    rig.clock.advance(29)  # 12:00:29: 12:02 is 91 s away
    await rig.tick(service)
    assert keys_of(await rig.executions(), job) == minutes(1)
    rig.clock.advance(1)  # 12:00:30
    await rig.tick(service)
    assert keys_of(await rig.executions(), job) == minutes(1, 2)


async def test_a_tick_submits_a_bounded_number_of_occurrences_and_releases_the_rest(
    rig: CronRig,
) -> None:
    """20 every-second jobs, 60 occurrences each within the lead: with a budget of 250 a tick
    takes whole jobs until it is spent (5 jobs) and gives the other claims back at once."""
    jobs = [await rig.create(name=f"s{i:02}", expression="* * * * * *") for i in range(20)]
    rig.service.max_occurrences = 250
    assert await rig.service.run_once() == 5
    assert len(await rig.executions()) == 5 * 60
    other = rig.make_service("svc-2")  # the rest is claimable now, not after the lease
    assert await other.run_once() == 15
    for job in jobs:  # each occurrence once (the history is unique per occurrence and outcome)
        assert len(await rig.outcomes(job["name"])) == 60
