"""The cron job rules as a service, on both backends: a create is created, the same spec again
same (nothing written), a change guarded by the version the caller read, a target that does not
exist or refuses the inputs stores nothing, and pause/resume say whether they changed the job
and hand the materialised occurrences to the Cron Service's port."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from tests.factories import T0, definition, stored
from tickwheel.app.cron_jobs import CronJobService
from tickwheel.app.outcomes import Outcome
from tickwheel.client.cron_wire import spec_to_wire
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.cron_jobs import (
    AuditAction,
    CronJob,
    CronJobSpec,
    CronJobStatus,
    OccurrenceRecord,
)
from tickwheel.domain.errors import Conflict, InvalidInput, NotFound
from tickwheel.store.factory import cron_store_for, workflow_store_for
from tickwheel.store.protocol import Store

SPEC = CronJobSpec(
    name="nightly", definition_uri="registry://jobs/greet", expression="0 2 * * *", inputs={}
)
NAMED = replace(SPEC, inputs={"name": "ops"})


class Port:
    """The ``Materialised`` port, recording what the rules asked of the Cron Service."""

    def __init__(self) -> None:
        self.cancelled: list[tuple[str, int, bool]] = []
        self.missed: list[str] = []

    async def cancel(
        self, job: CronJob, now: datetime, *, record: bool = True
    ) -> list[OccurrenceRecord]:
        self.cancelled.append((job.name, job.version, record))
        return []

    def missed_while_paused(self, job: CronJob, now: datetime) -> list[OccurrenceRecord]:
        self.missed.append(job.name)
        return []


async def rules(store: Store, clock: FakeClock, port: Port | None = None) -> CronJobService:
    assert await store.definition_insert(stored(definition()))
    return CronJobService(
        cron_store_for(store),
        store,
        "acme",
        "tester",
        spec_document=spec_to_wire,
        materialised=port or Port(),
        workflows=workflow_store_for(store),
        clock=clock,
    )


async def actions(service: CronJobService, job: CronJob) -> list[AuditAction]:
    entries = await service.cron.cron_audit_list("acme", job.cron_job_id, 50)
    return [e.action for e in entries]


async def test_create_is_created_then_same_and_other_settings_a_conflict(store: Store) -> None:
    clock = FakeClock(T0)
    service = await rules(store, clock)
    first = await service.create_job(NAMED)
    assert first.outcome is Outcome.CREATED and first.value.version == 1
    assert first.value.status is CronJobStatus.ACTIVE
    assert first.value.next_run_at == datetime(2026, 3, 2, 2, 0, tzinfo=UTC)  # T0 is noon

    clock.advance(60)
    again = await service.create_job(NAMED)
    assert again.outcome is Outcome.SAME and again.value == first.value

    with pytest.raises(Conflict) as conflict:
        await service.create_job(replace(NAMED, expression="0 3 * * *"))
    assert conflict.value.details["cronJobId"] == str(first.value.cron_job_id)
    assert await service.find("nightly") == first.value
    assert await actions(service, first.value) == [AuditAction.CREATED]


async def test_a_target_that_is_missing_or_refuses_the_inputs_stores_nothing(
    store: Store,
) -> None:
    service = await rules(store, FakeClock(T0))
    with pytest.raises(InvalidInput):
        await service.create_job(SPEC)  # greet needs its "name" input
    with pytest.raises(InvalidInput):
        await service.create_job(replace(NAMED, definition_uri="registry://jobs/nope"))
    assert await service.cron.cron_job_list("acme", None, 10) == []
    with pytest.raises(NotFound):
        await service.find("nightly")


async def test_a_change_is_guarded_by_the_version_read(store: Store) -> None:
    clock = FakeClock(T0)
    service = await rules(store, clock)
    job = (await service.create_job(NAMED)).value

    unchanged = await service.change(job, NAMED, version=1)
    assert unchanged.outcome is Outcome.SAME and unchanged.value.version == 1

    clock.advance(60)
    changed = await service.change(job, replace(NAMED, expression="0 3 * * *"), version=1)
    assert changed.outcome is Outcome.CREATED and changed.value.version == 2
    assert changed.value.next_run_at is not None and changed.value.next_run_at.hour == 3

    with pytest.raises(Conflict) as stale:
        await service.change(changed.value, replace(NAMED, expression="0 4 * * *"), version=1)
    assert stale.value.details == {"version": 2, "expected": 1}
    with pytest.raises(Conflict):  # read at version 1, written meanwhile: the store refuses
        await service.change(job, replace(NAMED, expression="0 4 * * *"))
    with pytest.raises(InvalidInput):  # a new target is checked again
        await service.change(changed.value, replace(NAMED, inputs={}), version=2)
    assert (await service.find(job.cron_job_id)) == changed.value
    assert await actions(service, job) == [AuditAction.CREATED, AuditAction.UPDATED]


async def test_pause_and_resume_say_whether_they_changed_the_job(store: Store) -> None:
    clock = FakeClock(T0)
    port = Port()
    service = await rules(store, clock, port)
    job = (await service.create_job(NAMED)).value

    paused = await service.pause_job("nightly")
    assert paused.outcome is Outcome.CREATED and paused.value.status is CronJobStatus.PAUSED
    assert paused.value.paused_at == T0 and paused.value.version == 2
    again = await service.pause_job(job.cron_job_id)
    assert again.outcome is Outcome.SAME and again.value.version == 2
    # Each pause, the retried one too, cancels what was materialised and not started.
    assert port.cancelled == [("nightly", 2, True), ("nightly", 2, True)]

    clock.advance(3 * 86400)  # three nights missed
    resumed = await service.resume_job("nightly", catch_up=False)
    assert resumed.outcome is Outcome.CREATED and resumed.value.status is CronJobStatus.ACTIVE
    assert port.missed == ["nightly"]
    assert resumed.value.next_run_at is not None and resumed.value.next_run_at > clock.now()
    assert (await service.resume_job("nightly", catch_up=False)).outcome is Outcome.SAME
    assert await actions(service, job) == [
        AuditAction.CREATED,
        AuditAction.PAUSED,
        AuditAction.RESUMED,
    ]


async def test_delete_names_the_version_and_cancels_without_records(store: Store) -> None:
    port = Port()
    service = await rules(store, FakeClock(T0), port)
    job = (await service.create_job(NAMED)).value
    with pytest.raises(Conflict):
        await service.delete_job("nightly", version=7)
    assert port.cancelled == []

    gone = await service.delete_job("nightly", version=1)
    assert gone == job and port.cancelled == [("nightly", 1, False)]
    with pytest.raises(NotFound):
        await service.find(job.cron_job_id)
