"""The CronStore conformance suite: every test runs on SQLite and PostgreSQL (``store`` fixture),
through the cron store built on the main store's connection or pool."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from tests.cron_factories import audit, cron_job, record
from tests.factories import T0
from tickwheel.domain.cron import DstPolicy
from tickwheel.domain.cron_jobs import (
    AuditAction,
    CronJob,
    CronJobStatus,
    MisfirePolicy,
    Outcome,
    OverlapPolicy,
)
from tickwheel.store.cron_protocol import CronAdvance, CronStore, HistoryCursor
from tickwheel.store.factory import cron_store_for
from tickwheel.store.protocol import Store

S = timedelta(seconds=1)
LEAD = timedelta(seconds=60)
LEASE = timedelta(seconds=30)


@pytest.fixture
def cron(store: Store) -> CronStore:
    return cron_store_for(store)


async def test_a_job_round_trips_with_every_field(cron: CronStore) -> None:
    job = cron_job(
        expression="30 2 * * MON-FRI",
        timezone="Europe/Berlin",
        definition_version=3,
        inputs={"name": "Ada", "times": 2},
        dst_policy=DstPolicy(nonexistent="skip", ambiguous="both"),
        misfire_policy=MisfirePolicy.CATCH_UP,
        max_catch_up=7,
        overlap_policy=OverlapPolicy.REPLACE,
        jitter_seconds=30,
        start_at=T0,
        end_at=T0 + timedelta(days=30),
    )
    assert await cron.cron_job_insert(job, audit(job))
    assert await cron.cron_job_get("acme", job.cron_job_id) == job
    assert await cron.cron_job_get_by_name("acme", "nightly") == job
    assert await cron.cron_job_get("other", job.cron_job_id) is None


async def test_a_name_is_unique_per_tenant(cron: CronStore) -> None:
    first = cron_job()
    assert await cron.cron_job_insert(first, audit(first))
    again = cron_job()
    assert not await cron.cron_job_insert(again, audit(again))
    elsewhere = cron_job("globex")
    assert await cron.cron_job_insert(elsewhere, audit(elsewhere))
    assert [a.action for a in await cron.cron_audit_list("acme", first.cron_job_id, 10)] == [
        AuditAction.CREATED
    ]
    assert await cron.cron_audit_list("acme", again.cron_job_id, 10) == []


async def test_list_is_by_name_and_keyset_paged(cron: CronStore) -> None:
    for name in ("c", "a", "b", "d"):
        job = cron_job(name=name)
        await cron.cron_job_insert(job, audit(job))
    other = cron_job("globex", name="aa")
    await cron.cron_job_insert(other, audit(other))
    page = await cron.cron_job_list("acme", None, 3)
    assert [j.name for j in page] == ["a", "b", "c"]
    assert [j.name for j in await cron.cron_job_list("acme", "c", 3)] == ["d"]


async def test_update_is_guarded_by_the_version(cron: CronStore) -> None:
    job = cron_job()
    await cron.cron_job_insert(job, audit(job))
    changed = replace(job, spec=replace(job.spec, inputs={"name": "Grace"}), version=2)
    stale = replace(job, spec=replace(job.spec, inputs={"name": "Lost"}), version=2)
    updated = await cron.cron_job_update(changed, 1, audit(job, AuditAction.UPDATED))
    assert updated is not None and updated.spec.inputs == {"name": "Grace"}
    assert await cron.cron_job_update(stale, 1, audit(job, AuditAction.UPDATED)) is None
    got = await cron.cron_job_get("acme", job.cron_job_id)
    assert got is not None and got.version == 2 and got.spec.inputs == {"name": "Grace"}
    actions = [a.action for a in await cron.cron_audit_list("acme", job.cron_job_id, 10)]
    assert actions == [AuditAction.CREATED, AuditAction.UPDATED]


async def test_update_records_history_rows_in_the_same_transaction(cron: CronStore) -> None:
    job = cron_job()
    await cron.cron_job_insert(job, audit(job))
    paused = replace(job, status=CronJobStatus.ACTIVE, version=2)
    rows = [
        record(job.cron_job_id, T0 + i * S, Outcome.SKIPPED_PAUSED, reason="paused")
        for i in range(3)
    ]
    assert await cron.cron_job_update(paused, 1, audit(job, AuditAction.RESUMED), rows)
    history = await cron.cron_occurrence_list("acme", job.cron_job_id, None, 10)
    assert [h.occurrence for h in history] == [T0 + 2 * S, T0 + S, T0]
    assert {h.outcome for h in history} == {Outcome.SKIPPED_PAUSED}


async def test_delete_is_guarded_takes_the_history_and_keeps_the_audit(cron: CronStore) -> None:
    job = cron_job()
    await cron.cron_job_insert(job, audit(job))
    await cron.cron_job_update(
        replace(job, version=2), 1, audit(job, AuditAction.UPDATED), [record(job.cron_job_id, T0)]
    )
    assert not await cron.cron_job_delete(
        "acme", job.cron_job_id, 1, audit(job, AuditAction.DELETED)
    )
    assert not await cron.cron_job_delete(
        "other", job.cron_job_id, 2, audit(job, AuditAction.DELETED)
    )
    assert await cron.cron_job_delete("acme", job.cron_job_id, 2, audit(job, AuditAction.DELETED))
    assert await cron.cron_job_get("acme", job.cron_job_id) is None
    assert await cron.cron_occurrence_list("acme", job.cron_job_id, None, 10) == []
    trail = await cron.cron_audit_list("acme", job.cron_job_id, 10)
    assert [a.action for a in trail] == [
        AuditAction.CREATED,
        AuditAction.UPDATED,
        AuditAction.DELETED,
    ]


async def test_claim_takes_due_jobs_oldest_first_within_the_lead(cron: CronStore) -> None:
    jobs = {
        "late": cron_job(name="late", next_run_at=T0 - 10 * S),
        "now": cron_job(name="now", next_run_at=T0),
        "soon": cron_job(name="soon", next_run_at=T0 + 60 * S),
        "later": cron_job(name="later", next_run_at=T0 + 61 * S),
        "paused": cron_job(name="paused", next_run_at=T0, status=CronJobStatus.PAUSED),
        "ended": cron_job(name="ended", next_run_at=None),
        # Overlap-checked jobs are due at their occurrence, not a lead ahead.
        "forbid-soon": cron_job(
            name="forbid-soon", next_run_at=T0 + S, overlap_policy=OverlapPolicy.FORBID
        ),
        "forbid-now": cron_job(
            name="forbid-now", next_run_at=T0, overlap_policy=OverlapPolicy.FORBID
        ),
    }
    for job in jobs.values():
        await cron.cron_job_insert(job, audit(job))
    claim = await cron.cron_job_claim_due("a", 10, LEAD, LEASE, now=T0)
    assert claim.now == T0
    assert claim.jobs[0].name == "late"
    assert {j.name for j in claim.jobs} == {"late", "now", "soon", "forbid-now"}
    # Claimed jobs are leased: nobody else gets them until the lease runs out.
    assert (await cron.cron_job_claim_due("b", 10, LEAD, LEASE, now=T0 + 29 * S)).jobs != []
    again = await cron.cron_job_claim_due("b", 10, LEAD, LEASE, now=T0 + 29 * S)
    assert again.jobs == []
    expired = await cron.cron_job_claim_due("b", 10, LEAD, LEASE, now=T0 + 40 * S)
    assert {j.name for j in expired.jobs} == {"late", "now", "soon", "forbid-now"}


async def test_claim_respects_the_limit_and_the_tenant(cron: CronStore) -> None:
    for i in range(5):
        job = cron_job(name=f"j{i}", next_run_at=T0 + i * S)
        await cron.cron_job_insert(job, audit(job))
    other = cron_job("globex", name="g", next_run_at=T0 - S)
    await cron.cron_job_insert(other, audit(other))
    first = await cron.cron_job_claim_due("a", 2, LEAD, LEASE, tenant="acme", now=T0)
    assert [j.name for j in first.jobs] == ["j0", "j1"]
    rest = await cron.cron_job_claim_due("a", 10, LEAD, LEASE, tenant="acme", now=T0)
    assert [j.name for j in rest.jobs] == ["j2", "j3", "j4"]
    anyone = await cron.cron_job_claim_due("a", 10, LEAD, LEASE, now=T0)
    assert [j.name for j in anyone.jobs] == ["g"]


async def test_concurrent_claims_never_share_a_job(cron: CronStore) -> None:
    for i in range(40):
        job = cron_job(name=f"j{i:02}", next_run_at=T0 - i * S)
        await cron.cron_job_insert(job, audit(job))
    claims = await asyncio.gather(
        *(cron.cron_job_claim_due(f"owner{n}", 5, LEAD, LEASE, now=T0) for n in range(12))
    )
    ids = [j.cron_job_id for c in claims for j in c.jobs]
    assert len(ids) == len(set(ids)) == 40


async def test_advance_records_once_and_moves_the_job_on(cron: CronStore) -> None:
    job = cron_job(next_run_at=T0)
    await cron.cron_job_insert(job, audit(job))
    [claimed] = (await cron.cron_job_claim_due("a", 10, LEAD, LEASE, now=T0)).jobs
    execution = uuid.uuid4()
    rows = [record(job.cron_job_id, T0, execution_id=execution, execute_at=T0 + S)]
    advance = CronAdvance(
        job.cron_job_id, 1, T0, T0 + timedelta(days=1), T0, execution, records=rows
    )
    assert await cron.cron_job_advance("a", advance, T0)
    got = await cron.cron_job_get("acme", job.cron_job_id)
    assert got is not None and got.next_run_at == T0 + timedelta(days=1)
    assert got.last_occurrence == T0 and got.last_execution_id == execution
    # The same tick retried (a crash after the commit): the guard refuses, nothing doubles.
    assert not await cron.cron_job_advance("a", advance, T0)
    [history] = await cron.cron_occurrence_list("acme", job.cron_job_id, None, 10)
    assert history.execution_id == execution and history.execute_at == T0 + S
    assert claimed.version == 1


@pytest.mark.parametrize("guard", ["owner", "version", "next_run_at"])
async def test_advance_is_a_no_op_when_its_guard_fails(cron: CronStore, guard: str) -> None:
    job = cron_job(next_run_at=T0)
    await cron.cron_job_insert(job, audit(job))
    await cron.cron_job_claim_due("a", 10, LEAD, LEASE, now=T0)
    if guard == "version":  # a user edited (or paused) the job during the tick
        await cron.cron_job_update(replace(job, version=2), 1, audit(job, AuditAction.UPDATED))
    owner = "b" if guard == "owner" else "a"
    expected_next = T0 - S if guard == "next_run_at" else T0
    rows = [record(job.cron_job_id, T0)]
    advance = CronAdvance(job.cron_job_id, 1, expected_next, T0 + 60 * S, records=rows)
    assert not await cron.cron_job_advance(owner, advance, T0)
    got = await cron.cron_job_get("acme", job.cron_job_id)
    assert got is not None and got.next_run_at == T0
    # What was materialised stays recorded: its execution exists.
    assert len(await cron.cron_occurrence_list("acme", job.cron_job_id, None, 10)) == 1
    if guard != "owner":  # the loser gave its claim back, so another tick may run at once
        assert (await cron.cron_job_claim_due("c", 10, LEAD, LEASE, now=T0)).jobs != []


async def test_advance_of_a_deleted_job_records_nothing(cron: CronStore) -> None:
    job = cron_job(next_run_at=T0)
    await cron.cron_job_insert(job, audit(job))
    await cron.cron_job_claim_due("a", 10, LEAD, LEASE, now=T0)
    await cron.cron_job_delete("acme", job.cron_job_id, 1, audit(job, AuditAction.DELETED))
    advance = CronAdvance(job.cron_job_id, 1, T0, T0 + S, records=[record(job.cron_job_id, T0)])
    assert not await cron.cron_job_advance("a", advance, T0)


async def test_release_gives_claims_back(cron: CronStore) -> None:
    job = cron_job(next_run_at=T0)
    await cron.cron_job_insert(job, audit(job))
    await cron.cron_job_claim_due("a", 10, LEAD, LEASE, now=T0)
    await cron.cron_job_release("b", [job.cron_job_id])  # not b's claim: nothing happens
    assert (await cron.cron_job_claim_due("c", 10, LEAD, LEASE, now=T0)).jobs == []
    await cron.cron_job_release("a", [job.cron_job_id])
    assert (await cron.cron_job_claim_due("c", 10, LEAD, LEASE, now=T0)).jobs != []


async def test_history_is_newest_first_keyset_paged_and_tenant_scoped(cron: CronStore) -> None:
    job = cron_job(next_run_at=T0)
    await cron.cron_job_insert(job, audit(job))
    await cron.cron_job_claim_due("a", 10, LEAD, LEASE, now=T0)
    rows = [record(job.cron_job_id, T0 + i * S) for i in range(5)]
    rows.append(record(job.cron_job_id, T0 + 4 * S, Outcome.REPLACED, reason="cancelled"))
    await cron.cron_job_advance(
        "a", CronAdvance(job.cron_job_id, 1, T0, T0 + 10 * S, records=rows), T0
    )
    first = await cron.cron_occurrence_list("acme", job.cron_job_id, None, 3)
    assert [(r.occurrence, r.outcome) for r in first] == [
        (T0 + 4 * S, Outcome.REPLACED),
        (T0 + 4 * S, Outcome.SUBMITTED),
        (T0 + 3 * S, Outcome.SUBMITTED),
    ]
    last = first[-1]
    assert last.record_id is not None
    cursor = HistoryCursor(last.occurrence, last.record_id)
    second = await cron.cron_occurrence_list("acme", job.cron_job_id, cursor, 3)
    assert [r.occurrence for r in second] == [T0 + 2 * S, T0 + S, T0]
    assert await cron.cron_occurrence_list("globex", job.cron_job_id, None, 10) == []


async def test_advance_many_guards_each_job_on_its_own(cron: CronStore) -> None:
    """One transaction for a tick's jobs: a job another instance advanced, one a user edited
    and one deleted meanwhile stay as they are; the others move on, each history row once."""
    jobs = [cron_job(name=f"job-{i}", next_run_at=T0) for i in range(5)]
    for job in jobs:
        await cron.cron_job_insert(job, audit(job))
    claimed = (await cron.cron_job_claim_due("a", 10, LEAD, LEASE, now=T0)).jobs
    assert len(claimed) == 5
    edited, deleted, stale = jobs[1], jobs[2], jobs[3]
    await cron.cron_job_update(replace(edited, version=2), 1, audit(edited, AuditAction.UPDATED))
    await cron.cron_job_delete("acme", deleted.cron_job_id, 1, audit(deleted, AuditAction.DELETED))
    execution = uuid.uuid4()

    def advance_for(job: CronJob, expected: datetime = T0) -> CronAdvance:
        rows = [record(job.cron_job_id, T0, execution_id=execution, execute_at=T0)]
        return CronAdvance(
            job.cron_job_id, 1, expected, T0 + timedelta(hours=2), T0, execution, records=rows
        )

    advances = [advance_for(j, T0 - S if j is stale else T0) for j in jobs]
    moved = await cron.cron_job_advance_many("a", advances, T0)
    assert moved == {jobs[0].cron_job_id, jobs[4].cron_job_id}
    for job in (jobs[0], jobs[4]):
        got = await cron.cron_job_get("acme", job.cron_job_id)
        assert got is not None and got.next_run_at == T0 + timedelta(hours=2)
        assert got.last_execution_id == execution
    for job in (edited, stale):  # not moved, the claim given back, the row kept
        got = await cron.cron_job_get("acme", job.cron_job_id)
        assert got is not None and got.next_run_at == T0
        assert len(await cron.cron_occurrence_list("acme", job.cron_job_id, None, 10)) == 1
    again = (await cron.cron_job_claim_due("c", 10, LEAD, LEASE, now=T0)).jobs
    assert {j.cron_job_id for j in again} == {edited.cron_job_id, stale.cron_job_id}
    # The same tick retried: nothing moves twice, no history row doubles.
    assert await cron.cron_job_advance_many("a", advances, T0) == set()
    assert len(await cron.cron_occurrence_list("acme", jobs[0].cron_job_id, None, 10)) == 1
    assert await cron.cron_job_advance_many("a", [], T0) == set()


async def test_advance_many_without_last_runs_or_rows(cron: CronStore) -> None:
    """Every optional column empty (a tick that only skipped): the arrays are all NULLs."""
    jobs = [cron_job(name=f"job-{i}", next_run_at=T0) for i in range(3)]
    for job in jobs:
        await cron.cron_job_insert(job, audit(job))
    await cron.cron_job_claim_due("a", 10, LEAD, LEASE, now=T0)
    advances = [CronAdvance(j.cron_job_id, 1, T0, None) for j in jobs]
    assert await cron.cron_job_advance_many("a", advances, T0) == {j.cron_job_id for j in jobs}
    got = await cron.cron_job_get("acme", jobs[0].cron_job_id)
    assert got is not None and got.next_run_at is None and got.last_occurrence is None


async def test_insert_many_skips_taken_names_and_their_audit(cron: CronStore) -> None:
    taken = cron_job(name="taken")
    await cron.cron_job_insert(taken, audit(taken))
    batch = [cron_job(name=f"job-{i}") for i in range(3)] + [cron_job(name="taken")]
    batch[0] = replace(batch[0], label="file-a")
    inserted = await cron.cron_job_insert_many(batch, [audit(j) for j in batch])
    assert inserted == {j.cron_job_id for j in batch[:3]}
    got = await cron.cron_job_get("acme", batch[0].cron_job_id)
    assert got is not None and got.label == "file-a"
    assert len(await cron.cron_audit_list("acme", batch[1].cron_job_id, 10)) == 1
    assert await cron.cron_audit_list("acme", batch[3].cron_job_id, 10) == []
    assert await cron.cron_job_insert_many([], []) == set()


async def test_jobs_by_names_and_prunable_by_label(cron: CronStore) -> None:
    jobs = [
        replace(cron_job(name="a1"), label="a"),
        replace(cron_job(name="a2"), label="a"),
        replace(cron_job(name="b1"), label="b"),
        cron_job(name="n1"),
        cron_job("globex", name="a3"),
    ]
    jobs[4] = replace(jobs[4], label="a")
    assert len(await cron.cron_job_insert_many(jobs, [audit(j) for j in jobs])) == 5
    found = await cron.cron_job_get_by_names("acme", ["a1", "b1", "nope", "a3"])
    assert sorted(j.name for j in found) == ["a1", "b1"]
    assert await cron.cron_job_get_by_names("acme", []) == []
    assert [j.name for j in await cron.cron_job_prunable("acme", "a", ["a1"])] == ["a2"]
    assert [j.name for j in await cron.cron_job_prunable("acme", None, [])] == ["n1"]
    assert [j.name for j in await cron.cron_job_prunable("acme", "b", [])] == ["b1"]


async def test_an_apply_key_runs_once_and_keeps_its_result(cron: CronStore) -> None:
    stale = timedelta(minutes=10)
    first = await cron.cron_apply_begin("acme", "k1", "h1", T0, stale)
    assert first.state == "new"
    assert (await cron.cron_apply_begin("acme", "k1", "h1", T0 + S, stale)).state == "running"
    assert (await cron.cron_apply_begin("acme", "k1", "other", T0 + S, stale)).state == "mismatch"
    assert (await cron.cron_apply_begin("globex", "k1", "h1", T0, stale)).state == "new"
    await cron.cron_apply_finish("acme", "k1", {"summary": {"create": 2}})
    done = await cron.cron_apply_begin("acme", "k1", "h1", T0 + 2 * S, stale)
    assert done.state == "done" and done.result == {"summary": {"create": 2}}
    # A failed first try is forgotten: the retry runs it.
    assert (await cron.cron_apply_begin("acme", "k2", "h2", T0, stale)).state == "new"
    await cron.cron_apply_abandon("acme", "k2")
    assert (await cron.cron_apply_begin("acme", "k2", "h2", T0, stale)).state == "new"
    # A first try that died (no result for longer than `stale`) is taken over, once.
    later = T0 + stale + S
    assert (await cron.cron_apply_begin("acme", "k2", "h2", later, stale)).state == "new"
    assert (await cron.cron_apply_begin("acme", "k2", "h2", later, stale)).state == "running"
    # Results are kept a day.
    tomorrow = T0 + timedelta(days=1, seconds=5)
    assert (await cron.cron_apply_begin("acme", "k1", "h1", tomorrow, stale)).state == "new"
