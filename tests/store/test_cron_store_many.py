"""The CronStore's batch changes for ``cron apply`` (both backends): many guarded updates and
deletes in one transaction, each job guarded on its own version, audit rows only for the jobs
that changed."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from tests.cron_factories import audit, cron_job, record, spec
from tests.factories import T0
from tickwheel.domain.cron_jobs import AuditAction, CronJob
from tickwheel.store.cron_protocol import CronStore
from tickwheel.store.factory import cron_store_for
from tickwheel.store.protocol import Store

LATER = T0 + timedelta(minutes=5)


@pytest.fixture
def cron(store: Store) -> CronStore:
    return cron_store_for(store)


async def _stored(cron: CronStore, *names: str, tenant: str = "acme") -> list[CronJob]:
    jobs = [cron_job(tenant, name=name) for name in names]
    assert await cron.cron_job_insert_many(jobs, [audit(j) for j in jobs]) == {
        j.cron_job_id for j in jobs
    }
    return jobs


def _changed(job: CronJob) -> CronJob:
    return replace(
        job,
        spec=spec(job.name, "0 3 * * *"),
        next_run_at=LATER,
        version=job.version + 1,
        updated_at=LATER,
        label="file-a",
    )


async def test_update_many_writes_each_job_whose_version_still_matches(cron: CronStore) -> None:
    a, b, c = await _stored(cron, "a", "b", "c")
    # Someone edits b between the apply's read and its write: b's guard no longer matches.
    edited = replace(b, version=2, updated_at=LATER)
    assert await cron.cron_job_update(edited, 1, audit(edited, AuditAction.UPDATED)) is not None
    changes = [(_changed(job), job.version) for job in (a, b, c)]
    audits = [audit(job, AuditAction.UPDATED, at=LATER) for job, _ in changes]
    assert await cron.cron_job_update_many(changes, audits) == {a.cron_job_id, c.cron_job_id}
    for job in (a, c):
        assert await cron.cron_job_get("acme", job.cron_job_id) == _changed(job)
        trail = await cron.cron_audit_list("acme", job.cron_job_id, 10)
        assert [e.action for e in trail] == [AuditAction.CREATED, AuditAction.UPDATED]
    assert await cron.cron_job_get("acme", b.cron_job_id) == edited
    trail = await cron.cron_audit_list("acme", b.cron_job_id, 10)
    assert [e.at for e in trail] == [T0, T0]  # the apply's audit row for b was left out
    assert await cron.cron_job_update_many([], []) == set()


async def test_delete_many_deletes_each_job_at_its_version_in_its_tenant_only(
    cron: CronStore,
) -> None:
    a, b, c = await _stored(cron, "a", "b", "c")
    [theirs] = await _stored(cron, "a", tenant="other")
    await cron.cron_occurrences_record([record(a.cron_job_id, T0)])
    doomed = [(a.cron_job_id, 1), (b.cron_job_id, 7), (theirs.cron_job_id, 1)]
    audits = [
        audit(job, AuditAction.DELETED, at=LATER) for job in (a, b, replace(theirs, tenant="acme"))
    ]
    assert await cron.cron_job_delete_many("acme", doomed, audits) == {a.cron_job_id}
    assert await cron.cron_job_get("acme", a.cron_job_id) is None
    assert await cron.cron_occurrence_list("acme", a.cron_job_id, None, 10) == []
    trail = await cron.cron_audit_list("acme", a.cron_job_id, 10)
    assert [e.action for e in trail] == [AuditAction.CREATED, AuditAction.DELETED]
    # b was at another version, c was not named, the other tenant's job is not this tenant's.
    for tenant, job in (("acme", b), ("acme", c), ("other", theirs)):
        assert await cron.cron_job_get(tenant, job.cron_job_id) == job
    assert len(await cron.cron_audit_list("acme", b.cron_job_id, 10)) == 1
    assert await cron.cron_job_delete_many("acme", [], []) == set()


async def test_history_rows_outside_a_tick_are_recorded_once_and_only_for_jobs_that_exist(
    cron: CronStore,
) -> None:
    a, b = await _stored(cron, "a", "b")
    assert await cron.cron_job_delete_many("acme", [(b.cron_job_id, 1)], [audit(b)]) == {
        b.cron_job_id
    }
    rows = [record(a.cron_job_id, T0), record(a.cron_job_id, LATER), record(b.cron_job_id, T0)]
    assert await cron.cron_occurrences_record(rows) == {a.cron_job_id}
    assert await cron.cron_occurrences_record(rows[:1]) == {a.cron_job_id}  # again: no new row
    history = await cron.cron_occurrence_list("acme", a.cron_job_id, None, 10)
    assert [r.occurrence for r in history] == [LATER, T0]
    assert await cron.cron_occurrences_record([]) == set()
