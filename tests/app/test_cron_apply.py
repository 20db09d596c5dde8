"""``cron apply`` as a service of the application layer, on both backends: a typed plan (what
each declared and pruned job became), nothing changed by a dry run or by an invalid list, the
result kept for an apply key and handed back (``SAME``) to a retry, and pruned jobs'
materialised occurrences handed to the Cron Service's port. The API's answer built from it is
checked in ``tests/cron/test_apply_*.py`` and ``tests/api/test_cron_api.py``."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import pytest

from tests.app.test_cron_jobs import Port, rules
from tests.factories import T0
from tickwheel.app.cron_apply import Applied, CronApplyService, PlanAction, PlanStep
from tickwheel.app.outcomes import Outcome
from tickwheel.client.cron_wire import spec_from_wire
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.errors import InvalidInput
from tickwheel.store.protocol import Store


class ManyPort(Port):
    def __init__(self) -> None:
        super().__init__()
        self.swept: list[set[uuid.UUID]] = []

    async def cancel_many(self, tenant: str, cron_job_ids: set[uuid.UUID], now: datetime) -> int:
        self.swept.append(cron_job_ids)
        return 0


INPUTS = {"name": "ops"}


def doc(name: str, expression: str = "0 2 * * *") -> dict[str, Any]:
    return {"name": name, "definitionUri": "greet", "expression": expression, "inputs": INPUTS}


async def test_a_plan_of_typed_steps_dry_run_first_then_applied(store: Store) -> None:
    port = ManyPort()
    jobs = await rules(store, FakeClock(T0), port)
    applying = CronApplyService(jobs, spec_from_wire)
    await jobs.create_job(spec_from_wire(doc("old")))
    await jobs.create_job(spec_from_wire(doc("same")))

    dry = await applying.apply([doc("new"), doc("same")], prune=True, dry_run=True)
    assert dry.plan == (
        PlanStep(PlanAction.CREATE, "new", None),
        PlanStep(PlanAction.UNCHANGED, "same", dry.plan[1].cron_job_id),
        PlanStep(PlanAction.DELETE, "old", dry.plan[2].cron_job_id),
    )
    assert dry.replayed is None and dry.outcome is Outcome.CREATED
    assert await jobs.cron.cron_job_get_by_name("acme", "new") is None  # a dry run changes nothing

    done = await applying.apply([doc("new"), doc("same", "@daily")], prune=True, dry_run=False)
    assert [(s.action, s.name, s.changes) for s in done.plan] == [
        (PlanAction.CREATE, "new", ()),
        (PlanAction.UPDATE, "same", ("expression",)),
        (PlanAction.DELETE, "old", ()),
    ]
    assert done.summary == {"create": 1, "update": 1, "delete": 1, "unchanged": 0}
    new = await jobs.cron.cron_job_get_by_name("acme", "new")
    assert new is not None and done.plan[0].cron_job_id == new.cron_job_id
    assert port.cancelled == [("old", 1, False)]  # a few pruned jobs: one by one, unrecorded


async def test_an_invalid_document_changes_nothing_and_is_located(store: Store) -> None:
    jobs = await rules(store, FakeClock(T0))
    applying = CronApplyService(jobs, spec_from_wire)
    with pytest.raises(InvalidInput) as bad:
        await applying.apply(
            [doc("a"), {**doc("b"), "timezone": "Mars/Olympus"}, doc("a")],
            prune=False,
            dry_run=False,
        )
    assert [e.path for e in bad.value.errors] == ["cronJobs[1].timezone", "cronJobs[2].name"]
    assert await jobs.cron.cron_job_get_by_name("acme", "a") is None


async def test_a_keyed_result_is_kept_and_replayed_as_same(store: Store) -> None:
    jobs = await rules(store, FakeClock(T0))
    applying = CronApplyService(jobs, spec_from_wire)
    first = await applying.apply([doc("a")], prune=False, dry_run=False, apply_key="k1")
    assert first.outcome is Outcome.CREATED and first.replayed is False
    again = await applying.apply([doc("a")], prune=False, dry_run=False, apply_key="k1")
    assert again.outcome is Outcome.SAME and again.replayed is True
    assert again.plan == first.plan  # the first try's plan (a create), not "unchanged"
    assert Applied.from_record(first.record(), replayed=True) == again
