"""The tuning of each long-running service, with its defaults written once.

A service takes its settings object; ``config.Settings`` (the ``TICKWHEEL_*`` environment and
the CLI flags on top) builds them, and takes its own defaults from here, so a default changed
here changes the service, the server, every role process and the CLI's help alike. Wiring that
is not a tuning knob (the store, the clock, an owner id, which shards or definitions a process
serves) stays a constructor argument of the service.

Durations compared with instants are ``timedelta``; pauses between loop turns are seconds."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from tickwheel.domain.retention import PRUNE_BATCH

_30S = timedelta(seconds=30)


@dataclass(frozen=True, kw_only=True)
class SchedulerSettings:
    batch: int = 500
    """Executions promoted per statement, at most."""
    max_sleep: float = 1.0
    """Seconds the loop sleeps at most when nothing is due (a notification wakes it sooner)."""
    shard_lease: timedelta = timedelta(seconds=10)
    """A leased scheduler's hold on its shards, renewed every third of it."""
    window: timedelta = _30S
    """How far ahead the timing wheel holds due executions."""


@dataclass(frozen=True, kw_only=True)
class WorkerSettings:
    concurrency: int = 4
    """Attempts run at once."""
    lease: timedelta = _30S
    """A claim's life between heartbeats; the reaper takes back what outlives it."""
    poll: float = 1.0
    """Seconds between claims when nothing is ready and no notification comes ..."""
    heard_poll: float = 10.0
    """... and while the store hears every process's notifications (``hears_all``: PostgreSQL
    with its LISTEN in effect). Every change that makes work claimable notifies the workers (a
    rate limit's next token excepted: the claim says when, and the wait ends then), so this
    poll is a net only; one claim a second was most of an idle worker's cost (docs/scaling.md,
    "An idle worker's claims while it hears")."""
    max_inline_output: int = 64 * 1024
    """Larger outputs are stored by reference."""
    low_water: int | None = None
    """While more work is queued, claim once this many slots are free (None: a quarter of
    ``concurrency``) ..."""
    claim_wait: float = 0.02
    """... or once this many seconds passed since the first slot freed up."""
    finish_batch: int = 200
    """Finished attempts reported in one transaction, at most."""
    finish_interval: float = 0.01
    """Seconds a finished attempt may wait to share a transaction with others."""
    cancel_grace: float = 10.0
    """A cancelled command or container: seconds between SIGTERM and SIGKILL."""
    claim_ahead: bool = True
    """While attempts are short, claim the next slots' work while this batch runs (one round trip
    hidden behind the batch); see engine/worker.py."""
    ahead_batches: int = 4
    """Claiming ahead, how many batches of ``concurrency`` a worker may hold beyond its free
    slots. One batch ran out during the next claim's round trip (a no-op takes microseconds),
    and the worker waited on the database with nothing to run; four keep work in hand while the
    claim is out (docs/scaling.md, "The drain's pipeline")."""


@dataclass(frozen=True, kw_only=True)
class ReaperSettings:
    batch: int = 200
    """Expired leases decided per statement, at most."""
    interval: float = 1.0
    """Seconds between sweeps when the last one was not full, at least: between two, the reaper
    sleeps until the earliest lease of a RUNNING execution ends."""
    max_wait: float = 5.0
    """Seconds the reaper sleeps at most, asking again for the earliest lease. A lease taken
    after it asked is seen at its next question: one shorter than this (a worker's ``lease``
    under 5 s) may be reaped up to ``max_wait`` minus that lease late."""

    def __post_init__(self) -> None:
        if not 0 < self.interval <= self.max_wait:
            raise ValueError("the reaper's interval must be above 0 and at most its max_wait")


@dataclass(frozen=True, kw_only=True)
class PrunerSettings:
    retention: timedelta = timedelta(days=30)
    """Terminal executions (and cron history) finished longer ago are deleted."""
    batch: int = PRUNE_BATCH
    """Rows deleted per transaction, at most."""
    interval: float = 3600.0
    """Seconds between passes."""
    first_after: float = 60.0
    """Seconds from the service's start to its first pass."""


@dataclass(frozen=True, kw_only=True)
class CronSettings:
    lead: timedelta = timedelta(seconds=90)
    """Occurrences are materialised this far ahead: more than a minute, so the next herd of
    every-minute jobs is materialised before the current one starts."""
    grace: timedelta = timedelta(seconds=60)
    """An occurrence later than this is missed (the misfire policy decides what then)."""
    lease: timedelta = _30S
    """An instance's claim on a job; then another may take it."""
    batch: int = 500
    """Jobs claimed per tick, at most."""
    poll: float = 0.5
    """Seconds before the next tick after a failed one."""
    parallel: int = 2
    """Claims an instance works on at once while a herd is due (one otherwise)."""
    max_sleep: float = 30.0
    """Seconds an idle service sleeps at most: it sleeps until the next job is due, and a
    change to a job (``Topic.CRON``) wakes it sooner; this bounds a lost wake-up's delay."""


@dataclass(frozen=True, kw_only=True)
class OrchestratorSettings:
    lease: timedelta = _30S
    """An orchestrator's claim on outbox rows; then another takes them."""
    batch: int = 100
    """Outbox rows claimed per tick, at most."""
    poll: float = 1.0
    """Seconds between ticks when no notification comes."""
    stall_grace: timedelta = _30S
    """A run with no progress this long is advanced by a sweep."""
    sweep_every: timedelta = _30S
    """How often that sweep runs."""
