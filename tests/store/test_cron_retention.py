"""Retention of the Cron Service's history and audit rows beside executions': the pruner and
``cron_history_prune`` delete them by age in bounded batches, but never a job's newest history
row. Both backends, a fake clock."""

from __future__ import annotations

from datetime import timedelta

from tests.cron_factories import audit, cron_job, record
from tests.factories import T0
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.cron_jobs import AuditAction, Outcome
from tickwheel.engine.pruner import Pruner, prune_cron
from tickwheel.observability.metrics import Metrics
from tickwheel.services.settings import PrunerSettings
from tickwheel.store.factory import cron_store_for
from tickwheel.store.protocol import Store

DAY = timedelta(days=1)
H = timedelta(hours=1)


async def test_old_history_and_audit_rows_go_in_batches_and_the_newest_row_stays(
    store: Store,
) -> None:
    cron = cron_store_for(store)
    job = cron_job(at=T0 - 40 * DAY)
    await cron.cron_job_insert(job, audit(job, at=T0 - 40 * DAY))
    old = [
        record(job.cron_job_id, T0 - 40 * DAY + i * H, at=T0 - 40 * DAY + i * H) for i in range(5)
    ]
    young = record(job.cron_job_id, T0 - DAY, Outcome.SKIPPED_OVERLAP, at=T0 - DAY)
    await cron.cron_occurrences_record([*old, young])
    await cron.cron_job_update(job, 1, audit(job, AuditAction.UPDATED, at=T0 - DAY))

    cutoff = T0 - 30 * DAY
    assert await cron.cron_history_count_prunable(cutoff) == 6  # 5 history rows, 1 audit row
    assert await cron.cron_history_prune(cutoff, 2) == 3  # 2 history rows (bounded), 1 audit
    assert await prune_cron(cron, cutoff, 2) == 3  # 2 + a short batch of 1
    assert await cron.cron_history_count_prunable(cutoff) == 0

    rows = await cron.cron_occurrence_list("acme", job.cron_job_id, None, 10)
    assert [(r.occurrence, r.outcome) for r in rows] == [(T0 - DAY, Outcome.SKIPPED_OVERLAP)]
    trail = await cron.cron_audit_list("acme", job.cron_job_id, 10)
    assert [a.action for a in trail] == [AuditAction.UPDATED]


async def test_a_jobs_newest_history_row_is_kept_however_old(store: Store) -> None:
    cron = cron_store_for(store)
    quiet, busy = cron_job(name="quiet"), cron_job(name="busy")
    for job in (quiet, busy):
        await cron.cron_job_insert(job, audit(job, at=T0 - 90 * DAY))
    # A backfill recorded an older occurrence after the newest one: the newest by occurrence
    # (what the history page shows first) is the one kept, not the last row written.
    await cron.cron_occurrences_record(
        [
            record(quiet.cron_job_id, T0 - 60 * DAY, at=T0 - 60 * DAY),
            record(quiet.cron_job_id, T0 - 70 * DAY, at=T0 - 59 * DAY),
            record(busy.cron_job_id, T0 - 80 * DAY, at=T0 - 80 * DAY),
        ]
    )
    assert await prune_cron(cron, T0 - 30 * DAY) == 3  # one history row and two audit rows
    for job, kept in ((quiet, T0 - 60 * DAY), (busy, T0 - 80 * DAY)):
        rows = await cron.cron_occurrence_list("acme", job.cron_job_id, None, 10)
        assert [r.occurrence for r in rows] == [kept]
        assert await cron.cron_audit_list("acme", job.cron_job_id, 10) == []


async def test_the_audit_trail_of_a_deleted_job_ages_out_too(store: Store) -> None:
    cron = cron_store_for(store)
    job = cron_job()
    await cron.cron_job_insert(job, audit(job, at=T0 - 50 * DAY))
    assert await cron.cron_job_delete(
        "acme", job.cron_job_id, 1, audit(job, AuditAction.DELETED, at=T0 - 45 * DAY)
    )
    assert await cron.cron_history_count_prunable(T0 - 46 * DAY) == 1
    assert await prune_cron(cron, T0 - 30 * DAY) == 2
    assert await cron.cron_audit_list("acme", job.cron_job_id, 10) == []


async def test_the_pruner_service_keeps_cron_rows_for_the_retention_period(store: Store) -> None:
    cron = cron_store_for(store)
    job = cron_job()
    await cron.cron_job_insert(job, audit(job, at=T0 - 31 * DAY))
    await cron.cron_occurrences_record(
        [
            record(job.cron_job_id, T0 - 31 * DAY, at=T0 - 31 * DAY),
            record(job.cron_job_id, T0 - 29 * DAY, at=T0 - 29 * DAY),
            record(job.cron_job_id, T0 - 28 * DAY, at=T0 - 28 * DAY),
        ]
    )
    clock = FakeClock(T0)
    pruner = Pruner(store, clock, settings=PrunerSettings(retention=30 * DAY, batch=1))
    pruner.metrics = Metrics()
    assert await pruner.run_once() == 2  # the oldest history row and the creation's audit row
    assert await pruner.run_once() == 0
    assert pruner.metrics.value("tickwheel_executions_pruned_total") == 0  # executions only
    clock.advance(days=5)
    assert await pruner.run_once() == 1  # the row of T0 - 29d; the newest stays for ever
    rows = await cron.cron_occurrence_list("acme", job.cron_job_id, None, 10)
    assert [r.occurrence for r in rows] == [T0 - 28 * DAY]
