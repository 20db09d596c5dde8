"""The Cron Service's pure decisions: planning a tick, looking back over an outage, jitter."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from tests.cron_factories import cron_job, spec
from tickwheel.cron.policies import (
    MAX_PER_TICK,
    RECORD_LIMIT,
    idempotency_key,
    jitter,
    plan_tick,
)
from tickwheel.cron.schedule import TINY, Schedule
from tickwheel.domain.cron import fire_times, parse_expression, parse_timezone
from tickwheel.domain.cron_jobs import MisfirePolicy, Outcome, OverlapPolicy

T = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEAD = timedelta(seconds=60)
GRACE = timedelta(seconds=60)


def test_the_key_keeps_the_unjittered_occurrence_in_utc() -> None:
    job_id = uuid.UUID("01a22700-0b76-7089-8b88-056ff422bdef")
    berlin = datetime.fromisoformat("2026-03-29T03:00:00+02:00")
    assert idempotency_key(job_id, berlin) == f"cron:{job_id}:2026-03-29T01:00:00Z"


def test_jitter_is_deterministic_bounded_and_spread() -> None:
    ids = [uuid.uuid4() for _ in range(200)]
    delays = [jitter(i, T, 60) for i in ids]
    assert delays == [jitter(i, T, 60) for i in ids]
    assert all(timedelta(0) <= d < timedelta(seconds=60) for d in delays)
    assert len({d.seconds for d in delays}) > 40  # a thousand hourly jobs do not pile up
    assert jitter(ids[0], T, 0) == timedelta(0)


def test_on_time_plan_materialises_up_to_the_lead() -> None:
    job = cron_job(expression="*/20 * * * * *", next_run_at=T + timedelta(seconds=20))
    plan = plan_tick(job, Schedule(job.spec), T, LEAD, GRACE)
    assert [s.occurrence for s in plan.steps] == [T + timedelta(seconds=s) for s in (20, 40, 60)]
    assert all(s.submit for s in plan.steps)
    assert plan.next_run_at == T + timedelta(seconds=80)


def test_overlap_checked_jobs_get_no_lead() -> None:
    job = cron_job(expression="* * * * * *", next_run_at=T, overlap_policy=OverlapPolicy.FORBID)
    plan = plan_tick(job, Schedule(job.spec), T, LEAD, GRACE)
    assert [s.occurrence for s in plan.steps] == [T]
    assert plan.next_run_at == T + timedelta(seconds=1)


def test_a_busy_job_continues_in_the_next_tick() -> None:
    job = cron_job(expression="* * * * * *", next_run_at=T)
    plan = plan_tick(job, Schedule(job.spec), T, timedelta(hours=1), GRACE)
    assert len(plan.steps) == MAX_PER_TICK
    assert plan.next_run_at == T + timedelta(seconds=MAX_PER_TICK)


def test_a_week_long_outage_is_planned_without_walking_the_week() -> None:
    """604,800 missed every-second occurrences: the plan lists the last RECORD_LIMIT + 1 and
    one summary row, and takes well under a second."""
    job = cron_job(expression="* * * * * *", next_run_at=T)
    now = T + timedelta(days=7)
    began = time.perf_counter()
    plan = plan_tick(job, Schedule(job.spec), now, LEAD, GRACE)
    assert time.perf_counter() - began < 1.0
    missed = [s for s in plan.steps if s.occurrence < now - GRACE]
    assert missed[0].occurrence == T and "too many to list" in (missed[0].reason or "")
    assert len(missed) == 1 + RECORD_LIMIT + 1
    [run] = [s for s in missed if s.submit]
    assert run.occurrence == now - GRACE - timedelta(seconds=1)
    assert {s.outcome for s in missed if not s.submit} == {Outcome.COALESCED}


@pytest.mark.parametrize(
    ("expression", "zone"),
    [
        ("*/7 * * * *", "UTC"),
        ("0 2 * * *", "Europe/Berlin"),
        ("30 * * * *", "Australia/Lord_Howe"),
        ("0 9 * * MON-FRI", "America/New_York"),
    ],
)
def test_looking_back_agrees_with_walking_forward(expression: str, zone: str) -> None:
    schedule = Schedule(spec(expression=expression, timezone=zone))
    after, before = datetime(2026, 3, 20, tzinfo=UTC), datetime(2026, 4, 10, tzinfo=UTC)
    walked = [
        t
        for t in fire_times(parse_expression(expression), parse_timezone(zone), after, 10_000)
        if t < before
    ]
    for limit in (1, 5, 40):
        window, earlier = schedule.last_firing(after, before, limit)
        assert [r.at for r in window.firing] == walked[-limit:]
        assert earlier == (len(walked) > limit)


def test_misfire_policies_choose_what_runs() -> None:
    base = cron_job(expression="* * * * *", next_run_at=T + timedelta(minutes=1))
    now = T + timedelta(minutes=10)
    chosen = {}
    for policy in MisfirePolicy:
        job = replace(base, spec=replace(base.spec, misfire_policy=policy, max_catch_up=3))
        plan = plan_tick(job, Schedule(job.spec), now, LEAD, GRACE)
        chosen[policy] = [s.occurrence.minute for s in plan.steps if s.submit]
    assert chosen[MisfirePolicy.SKIP] == [9, 10, 11]
    assert chosen[MisfirePolicy.RUN_ONCE] == [8, 9, 10, 11]
    assert chosen[MisfirePolicy.CATCH_UP] == [6, 7, 8, 9, 10, 11]


def test_the_end_bound_ends_the_job() -> None:
    job = cron_job(expression="* * * * *", next_run_at=T + timedelta(minutes=1))
    job = replace(job, spec=replace(job.spec, end_at=T + timedelta(minutes=1, seconds=30)))
    plan = plan_tick(job, Schedule(job.spec), T, LEAD, GRACE)
    assert [s.occurrence for s in plan.steps] == [T + timedelta(minutes=1)]
    assert plan.next_run_at is None
    assert Schedule(job.spec).next_fire(T + timedelta(minutes=1) - TINY)[0] == T + timedelta(
        minutes=1
    )
