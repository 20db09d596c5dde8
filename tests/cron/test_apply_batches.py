"""``cron apply`` changes and removes jobs in batches like it creates them (issue 18): an apply
of a 10,000-job file that updates and prunes thousands costs a bounded number of store calls
(a thousand jobs a call), not one transaction per job; a job changed by someone else between
the diff and the write is left alone and reported; pruned jobs' materialised executions are
cancelled in one pass (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any, cast

import pytest

from tests.cron.helpers import TENANT, CronRig
from tests.cron_factories import audit
from tests.factories import T0, definition, stored
from tickwheel.app import cron_apply
from tickwheel.cron.jobs import CronJobs
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.cron_jobs import AuditAction
from tickwheel.domain.errors import Conflict
from tickwheel.store.cron_protocol import CronStore
from tickwheel.store.factory import cron_store_for
from tickwheel.store.protocol import Store


class Counted:
    """A store that counts the calls made through it: each is at least one round trip."""

    def __init__(self, inner: object, calls: Counter[str]) -> None:
        self._inner = inner
        self._calls = calls

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if callable(attr):
            self._calls[name] += 1
        return attr


def declared(names: list[str], expression: str = "0 2 * * *") -> list[dict[str, Any]]:
    return [
        {"name": n, "definitionUri": "greet", "expression": expression, "inputs": {"name": "Ada"}}
        for n in names
    ]


async def test_a_10k_apply_that_changes_and_prunes_thousands_is_a_few_calls_per_thousand(
    store: Store,
) -> None:
    await store.definition_insert(stored(definition()))
    calls: Counter[str] = Counter()
    cron = cron_store_for(store)
    jobs = CronJobs(
        cast(CronStore, Counted(cron, calls)),
        cast(Store, Counted(store, calls)),
        TENANT,
        "apply test",
        FakeClock(T0),
    )
    names = [f"job-{i:05}" for i in range(10_000)]
    first = await jobs.cron_apply(declared(names), prune=True, dry_run=False, label="f")
    assert first["summary"]["create"] == 10_000
    # 3,000 change their schedule, 3,000 leave the file (pruned), 500 are new, 4,000 stay.
    kept, changed, new = names[:4000], names[4000:7000], [f"new-{i:04}" for i in range(500)]
    calls.clear()
    docs = declared(kept) + declared(changed, "0 3 * * *") + declared(new)

    result = await jobs.cron_apply(docs, prune=True, dry_run=False, label="f")

    assert result["summary"] == {"create": 500, "update": 3000, "delete": 3000, "unchanged": 4000}
    # Per thousand jobs at most one call each to read, insert, update, delete: 8 reads of
    # declared names, 1 of the label's names and 3 of the pruned rows, 1 insert, 3 updates,
    # 3 deletes; one definition lookup, one sweep for materialised executions. Before the
    # batches, each update and each delete was a find, a write and a sweep of its own.
    assert calls["cron_job_update_many"] == 3 and calls["cron_job_delete_many"] == 3
    assert calls["cron_job_update"] == calls["cron_job_delete"] == 0
    assert sum(calls.values()) <= 25, calls
    assert await cron.cron_job_get_by_name(TENANT, names[7000]) is None
    moved = await cron.cron_job_get_by_name(TENANT, changed[0])
    assert moved is not None and moved.version == 2 and moved.spec.expression == "0 3 * * *"
    assert moved.next_run_at is not None and moved.next_run_at.hour == 3
    trail = await cron.cron_audit_list(TENANT, moved.cron_job_id, 10)
    assert [(e.action, e.actor) for e in trail] == [
        (AuditAction.CREATED, "apply test"),
        (AuditAction.UPDATED, "apply test"),
    ]
    same = await cron.cron_job_get_by_name(TENANT, kept[0])
    assert same is not None and same.version == 1
    again = await jobs.cron_apply(docs, prune=True, dry_run=False, label="f")
    assert again["summary"] == {"create": 0, "update": 0, "delete": 0, "unchanged": 7500}


class EditsFirst:
    """A cron store on which someone edits one job (and deletes another) after the apply read
    them and before it writes: its batch guards must leave both to that someone."""

    def __init__(self, inner: CronStore, edit: str, delete: str) -> None:
        self._inner = inner
        self._edit, self._delete = edit, delete

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def cron_job_update_many(self, changes: Any, audits: Any) -> Any:
        await self._touch(self._edit)
        return await self._inner.cron_job_update_many(changes, audits)

    async def cron_job_delete_many(self, tenant: str, doomed: Any, audits: Any) -> Any:
        await self._touch(self._delete)
        return await self._inner.cron_job_delete_many(tenant, doomed, audits)

    async def _touch(self, name: str) -> None:
        job = await self._inner.cron_job_get_by_name(TENANT, name)
        assert job is not None
        edited = replace(job, version=job.version + 1)
        assert await self._inner.cron_job_update(edited, job.version, audit(edited))


async def test_a_job_changed_between_the_diff_and_the_write_is_left_alone_and_reported(
    store: Store,
) -> None:
    await store.definition_insert(stored(definition()))
    cron = cron_store_for(store)
    plain = CronJobs(cron, store, TENANT, "apply test", FakeClock(T0))
    await plain.cron_apply(declared(["a", "b", "c", "d"]), prune=True, dry_run=False)
    racing = CronJobs(EditsFirst(cron, "a", "d"), store, TENANT, "apply test", FakeClock(T0))
    docs = declared(["a", "b"], "0 3 * * *") + declared(["c"])

    with pytest.raises(Conflict) as raised:
        await racing.cron_apply(docs, prune=True, dry_run=False)

    assert raised.value.details == {"changedMeanwhile": ["a", "d"]}
    assert "the rest was applied" in raised.value.message
    a, b, d = [await cron.cron_job_get_by_name(TENANT, n) for n in "abd"]
    assert a is not None and a.spec.expression == "0 2 * * *"  # the other edit stands
    assert b is not None and b.spec.expression == "0 3 * * *"
    assert d is not None  # not deleted at the version someone else moved past
    # Applying again reconciles them.
    result = await plain.cron_apply(docs, prune=True, dry_run=False)
    assert result["summary"] == {"create": 0, "update": 1, "delete": 1, "unchanged": 2}


@pytest.mark.parametrize("sweep_each", [20, 0], ids=["job by job", "one pass"])
async def test_pruned_jobs_materialised_occurrences_are_cancelled_others_kept(
    store: Store, sweep_each: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cron_apply, "SWEEP_EACH", sweep_each)
    rig = CronRig(store, T0)
    await rig.register()
    docs = declared(["gone", "stays"], "*/10 * * * * *")
    await rig.jobs.cron_apply(docs, prune=True, dry_run=False, label="f")
    await rig.tick()  # each job's next minute is materialised, SCHEDULED
    before = await rig.executions()
    assert len(before) == 12 and {str(e.status) for e in before.values()} == {"SCHEDULED"}

    await rig.jobs.cron_apply(docs[1:], prune=True, dry_run=False, label="f")

    stays = await rig.cron.cron_job_get_by_name(TENANT, "stays")
    assert stays is not None
    after = {key: str(e.status) for key, e in (await rig.executions()).items()}
    kept = f"cron:{stays.cron_job_id}:"
    assert sorted(s for k, s in after.items() if k.startswith(kept)) == ["SCHEDULED"] * 6
    assert sorted(s for k, s in after.items() if not k.startswith(kept)) == ["CANCELLED"] * 6
