"""The Cron Service's decisions, pure: which occurrences of a claimed job to materialise this
tick, which to record as skipped or coalesced (and why), where to continue, and the jitter.

The service feeds in the job, its schedule and the claim's ``now``; nothing here does I/O, so
every misfire and DST rule is tested without a database or a clock (STYLE.md: policy in the
service, SQL in the store).

Terms: an occurrence is *due* once it is within the lead (``occurrence <= now + lead``; for
jobs that forbid or replace overlapping runs, the lead is zero, because their overlap check
must see the previous run at fire time, and so it is for jobs that start workflow runs, because
a run starts when it is created). It is *missed* when it is more than the misfire grace
in the past (``occurrence < now - grace``) when it is materialised: the service was down, the
job paused, or the service fell behind (a tick planned in time but submitted too late: the
service plans again just before it submits, ``CronService._replan_late``). Missed occurrences
follow the misfire policy, whatever the cause; the others run.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from tickwheel.cron.schedule import TINY, Schedule
from tickwheel.domain.cron import FirePreview
from tickwheel.domain.cron_jobs import CronJob, MisfirePolicy, Outcome
from tickwheel.domain.submission import SubmitRequest

RECORD_LIMIT = 100
"""Missed occurrences listed one by one in the history; older ones share one summary row."""
MAX_PER_TICK = 500
"""Due occurrences materialised per job and tick; a job with more continues in the next."""


@dataclass(frozen=True)
class Step:
    """One occurrence and what to do with it: submit it (``outcome`` None), or record the
    ``outcome``. ``reason`` explains anything unusual, also on a submitted occurrence (late
    under a misfire policy, moved by a DST rule)."""

    occurrence: datetime
    outcome: Outcome | None = None
    reason: str | None = None

    @property
    def submit(self) -> bool:
        return self.outcome is None


@dataclass(frozen=True)
class Plan:
    steps: list[Step]
    next_run_at: datetime | None


DOWN = "the service was down or behind, or the job paused"


def plan_tick(
    job: CronJob,
    schedule: Schedule,
    now: datetime,
    lead: timedelta,
    grace: timedelta,
    behind: timedelta | None = None,
) -> Plan:
    """Everything due for ``job`` at ``now``, in occurrence order, and the next run after it.
    ``behind``: how long the tick that planned it first took to get to submitting it; given,
    the history says that falling behind, not an outage, is why occurrences were missed."""
    start = job.next_run_at
    if start is None:
        return Plan([], None)
    horizon = now + lead if job.spec.materialised_ahead else now
    cutoff = now - grace
    after = start - TINY
    steps: list[Step] = []
    if start < cutoff:
        cause = DOWN if behind is None else _behind(behind)
        steps += _missed(job, schedule, after, cutoff, now, cause)
        after = cutoff - TINY
    window = schedule.window(after, horizon, MAX_PER_TICK)
    steps += [_on_time(row) for row in window.rows]
    last = window.rows[-1].at if not window.complete else max(horizon, after)
    next_run_at, dst_skipped = schedule.next_fire(last)
    steps += [_on_time(row) for row in dst_skipped]
    return Plan(steps, next_run_at)


def _on_time(row: FirePreview) -> Step:
    if not row.fires:
        return Step(row.at, Outcome.SKIPPED_DST, row.reason)
    return Step(row.at, None, row.reason)


def _behind(behind: timedelta) -> str:
    return (
        f"the service fell behind: {_duration(behind)} between claiming the job and submitting it"
    )


def _missed(
    job: CronJob,
    schedule: Schedule,
    after: datetime,
    cutoff: datetime,
    now: datetime,
    cause: str,
) -> list[Step]:
    policy = job.spec.misfire_policy
    keep = {
        MisfirePolicy.SKIP: 0,
        MisfirePolicy.RUN_ONCE: 1,
        MisfirePolicy.CATCH_UP: job.spec.max_catch_up,
    }[policy]
    tail, earlier = schedule.last_firing(after, cutoff, keep + RECORD_LIMIT)
    firing = tail.firing
    run = {row.at for row in firing[len(firing) - keep :]} if keep else set()
    latest = firing[-1].at if firing else None
    steps: list[Step] = []
    if earlier and firing:
        first = after + TINY
        steps.append(
            Step(
                first,
                _dropped_outcome(policy),
                f"{_dropped_reason(job, latest, cause)}; this row stands for every missed "
                f"occurrence from {_iso(first)} up to {_iso(firing[0].at)}, too many to list "
                "one by one",
            )
        )
    for row in tail.rows:
        if not row.fires:
            steps.append(Step(row.at, Outcome.SKIPPED_DST, row.reason))
        elif row.at in run:
            late = f"missed by {_duration(now - row.at)} ({cause})"
            how = {
                MisfirePolicy.RUN_ONCE: "run once now for the missed occurrences "
                "(misfirePolicy run_once)",
                MisfirePolicy.CATCH_UP: "caught up late (misfirePolicy catch_up)",
            }.get(policy, "")
            reason = f"{late}; {how}" + (f"; {row.reason}" if row.reason else "")
            steps.append(Step(row.at, None, reason))
        else:
            reason = _dropped_reason(job, latest, cause)
            steps.append(Step(row.at, _dropped_outcome(policy), reason))
    return steps


def _dropped_outcome(policy: MisfirePolicy) -> Outcome:
    return Outcome.COALESCED if policy is MisfirePolicy.RUN_ONCE else Outcome.SKIPPED_MISFIRE


def _dropped_reason(job: CronJob, latest: datetime | None, cause: str) -> str:
    policy = job.spec.misfire_policy
    if policy is MisfirePolicy.RUN_ONCE:
        return (
            f"missed ({cause}); coalesced into one run for the "
            f"latest missed occurrence, {_iso(latest)} (misfirePolicy run_once)"
        )
    if policy is MisfirePolicy.CATCH_UP:
        return (
            f"missed ({cause}) and more than maxCatchUp "
            f"({job.spec.max_catch_up}) occurrences were missed; only the most recent "
            f"{job.spec.max_catch_up} ran (misfirePolicy catch_up)"
        )
    return f"missed ({cause}); not run (misfirePolicy skip)"


def jitter(cron_job_id: uuid.UUID, occurrence: datetime, jitter_seconds: int) -> timedelta:
    """A delay in [0, ``jitter_seconds``) in whole milliseconds, the same every time for one
    job and occurrence (a retried tick submits the same ``executeAt``) and spread evenly across
    jobs, so that a thousand ``0 * * * *`` jobs do not all start in the same second."""
    if jitter_seconds <= 0:
        return timedelta(0)
    digest = hashlib.sha256(f"{cron_job_id}|{_iso(occurrence)}".encode()).digest()
    return timedelta(milliseconds=int.from_bytes(digest[:8], "big") % (jitter_seconds * 1000))


def idempotency_key(cron_job_id: uuid.UUID, occurrence: datetime) -> str:
    """``cron:<cronJobId>:<occurrence in UTC, RFC 3339>``: the unjittered occurrence, so that
    whichever instance submits it, however often, one execution exists for it."""
    return f"cron:{cron_job_id}:{_iso(occurrence)}"


def _iso(instant: datetime | None) -> str:
    if instant is None:
        return "-"
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _duration(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            whole, rest = divmod(seconds, size)
            return f"{whole} {unit}" + (f" {rest // 60} min" if unit == "h" and rest >= 60 else "")
    return f"{seconds} s"


MAX_LATE = timedelta(days=1)
"""A missed occurrence run later than this gets ``executeAt = now - MAX_LATE`` rather than its
own time, so that it stays inside the API's window for past ``executeAt`` (7 days by default)."""


def occurrence_request(job: CronJob, occurrence: datetime, now: datetime) -> SubmitRequest:
    """The one request for ``occurrence`` of a job that targets a definition, whoever makes it
    (a tick, a trigger's backfill): the same key and body every time, so that an occurrence
    already materialised comes back as it is instead of conflicting."""
    assert job.spec.definition_uri is not None  # only jobs that target a definition
    execute_at = max(
        occurrence + jitter(job.cron_job_id, occurrence, job.spec.jitter_seconds),
        now - MAX_LATE,
    )
    return SubmitRequest(
        definition_uri=job.spec.definition_uri,
        inputs=job.spec.inputs,
        definition_version=job.spec.definition_version,
        execute_at=execute_at,
        idempotency_key=idempotency_key(job.cron_job_id, occurrence),
    )
