"""The drain's statements on a table that was never analyzed: a new database, or one whose
statistics are gone. The planner then prices ``status = 'READY'`` (or RUNNING) at half a percent
of the rows, and it once read every READY row per claim (a bitmap, then a sort) and every
RUNNING row per finished batch (a hash join): 3 to 14 ms a claim of 16 with 7,000 READY, and a
drain's database CPU per execution three times what it is with statistics (docs/scaling.md).
Each test fails on the code before that fix."""

from __future__ import annotations

import json

import pytest

from tests.factories import new_execution
from tests.store.plan_helpers import CLAIM_PARAMS, LEASE, executions_rows_read, explain
from tickwheel.domain.models import Execution
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.store.postgres.store import PostgresStore, Q
from tickwheel.store.protocol import AttemptResult

pytestmark = pytest.mark.postgres


async def test_a_claim_walks_the_ready_index_to_its_batch_without_statistics(
    unanalyzed: PostgresStore,
) -> None:
    for _ in range(3):
        await unanalyzed.execution_insert_many([new_execution() for _ in range(1_000)])
    for name in ("execution_claim_ready_unlimited", "execution_claim_ready"):
        plan = await explain(unanalyzed, Q[name], CLAIM_PARAMS)
        assert "Bitmap Heap Scan" not in json.dumps(plan), (name, plan)
        # The batch, the primary-key lookups of the update, and the tenants' probes.
        assert executions_rows_read(plan) <= 3 * 16 + 4, (name, plan)
    claimed = await unanalyzed.execution_claim_ready("w1", 16, LEASE)
    assert len(claimed) == 16


async def test_a_finished_batch_goes_by_primary_key_without_statistics(
    unanalyzed: PostgresStore,
) -> None:
    await unanalyzed.execution_insert_many([new_execution() for _ in range(3_000)])
    running: list[Execution] = []
    while len(running) < 3_000:
        running += await unanalyzed.execution_claim_ready("w1", 500, LEASE)
    done = running[:30]
    batch = [
        {
            "execution_id": str(e.execution_id),
            "fencing_token": e.fencing_token,
            "status": "SUCCEEDED",
            "attempt_status": "SUCCEEDED",
            "output": {},
            "output_reference": None,
            "error": None,
            "next_attempt_at": None,
            "lease_expired_only": False,
        }
        for e in done
    ]
    params = {
        "batch": json.dumps(batch),
        "now": None,
        "skip_prefix": None,
        "ready_channel": "tickwheel_test",
        "origin": "test",
    }
    # Any session, not only the claiming one: the statement itself leaves no other way.
    plan = await explain(unanalyzed, Q["execution_finish_many"], params, hot=False)
    assert executions_rows_read(plan) <= 2 * len(done), plan
    results = [
        AttemptResult(
            e.execution_id,
            e.fencing_token or 0,
            AttemptStatus.SUCCEEDED,
            ExecutionStatus.SUCCEEDED,
            output={},
            output_size=2,
        )
        for e in done
    ]
    assert await unanalyzed.attempt_finish_many(results) == [True] * len(done)
