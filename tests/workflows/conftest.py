"""Fixtures of the workflow tests: a rig on each backend's store with the test jobs registered,
and the test jobs' switches (``FAIL``, ``GATE``) cleared around every test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.workflows import jobs
from tests.workflows.helpers import WorkflowRig
from tickwheel.store.protocol import Store


@pytest.fixture
async def rig(store: Store) -> WorkflowRig:
    rig = WorkflowRig(store)
    await rig.register_jobs()
    return rig


@pytest.fixture(autouse=True)
def clean_jobs() -> Iterator[None]:
    jobs.FAIL.clear()
    jobs.GATE.clear()
    yield
    jobs.FAIL.clear()
    jobs.GATE.clear()
