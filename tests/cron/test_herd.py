"""A herd (more due jobs than one claim holds) is worked on ``parallel`` claims at once by one
instance: each job advanced once, each occurrence one execution, and a failing claim's jobs
given back while the others finish. Both backends, a fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cron.helpers import CronRig, keys_of
from tests.factories import T0
from tickwheel.domain.errors import Unavailable
from tickwheel.store.cron_protocol import CronAdvance, CronStore
from tickwheel.store.factory import cron_store_for
from tickwheel.store.protocol import Store


@pytest.fixture
async def rig(store: Store) -> CronRig:
    rig = CronRig(store, T0)
    await rig.register()
    return rig


async def test_one_round_works_on_parallel_claims_of_a_herd(rig: CronRig) -> None:
    jobs = [await rig.create(name=f"job-{i:02}", expression="* * * * *") for i in range(12)]
    service = rig.make_service("herd", batch=5, parallel=2)
    assert await service.run_once() == 10  # two full claims at once
    assert await service.run_once() == 2  # the rest: one short claim, nothing else claimed
    assert await service.run_once() == 0
    executions = await rig.executions()
    for job in jobs:
        assert keys_of(executions, job) == ["2026-03-01T12:01:00Z"]
    single = rig.make_service("single", batch=5, parallel=1)
    rig.clock.advance(60)
    assert [await single.run_once() for _ in range(4)] == [5, 5, 2, 0]


class FailsOnce:
    """A cron store whose first advance fails like a lost database."""

    def __init__(self, inner: CronStore) -> None:
        self.inner = inner
        self.failed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def cron_job_advance_many(self, owner: str, advances: list[CronAdvance], now: Any) -> Any:
        if not self.failed:
            self.failed = True
            raise Unavailable("the database went away")
        return await self.inner.cron_job_advance_many(owner, advances, now)


async def test_a_failing_claim_is_given_back_and_the_other_finishes(rig: CronRig) -> None:
    jobs = [await rig.create(name=f"job-{i:02}", expression="* * * * *") for i in range(10)]
    flaky = FailsOnce(rig.cron)
    service = rig.make_service("herd", flaky, batch=5, parallel=2)  # type: ignore[arg-type]
    with pytest.raises(Unavailable):
        await service.run_once()
    # The other claim advanced its 5; the failed one released its 5 at once (no lease wait).
    assert await rig.tick() == 5
    executions = await rig.executions()
    for job in jobs:  # resubmitted under the same key: still one execution each
        assert keys_of(executions, job) == ["2026-03-01T12:01:00Z"]
    for job in jobs:
        assert [o for _, o in await rig.outcomes(job["name"])] == ["SUBMITTED"]


async def test_a_claim_sees_every_edit_of_a_job_it_claimed_before(rig: CronRig) -> None:
    """The PostgreSQL store remembers claimed jobs by version and reads back only what a tick
    changes: an edit (a new version) must reach the next tick, from another store object as
    from this one."""
    job = await rig.create(expression="* * * * *", inputs={"name": "Ada"})
    service = rig.make_service("svc", cron_store_for(rig.store))  # its own store object
    assert await rig.tick(service) == 1
    await rig.jobs.cron_update(job["name"], {"inputs": {"name": "Grace"}, "version": 1})
    rig.clock.advance(60)
    assert await rig.tick(service) == 1
    rig.clock.advance(60)
    assert await rig.tick(service) == 1  # remembered at version 2 now: next run read back
    prefix = f"cron:{job['cronJobId']}:2026-03-01T12:"
    names = {k.removeprefix(prefix): e.inputs["name"] for k, e in (await rig.executions()).items()}
    assert names == {"01:00Z": "Ada", "02:00Z": "Grace", "03:00Z": "Grace"}


async def test_a_store_that_forgets_its_jobs_reads_them_again(
    rig: CronRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tickwheel.store.postgres.cron.MAX_REMEMBERED", 3)
    jobs = [await rig.create(name=f"job-{i:02}", expression="* * * * *") for i in range(5)]
    service = rig.make_service("svc", batch=2)
    for _ in range(3):
        assert await rig.tick(service) == 5
        rig.clock.advance(60)
    executions = await rig.executions()
    for job in jobs:
        assert keys_of(executions, job) == [f"2026-03-01T12:0{m}:00Z" for m in (1, 2, 3)]
