"""DELETE /v1/executions/{id} on a RUNNING execution, through the SDK over HTTP (both
backends): a cancel request, answered 200 with the execution still RUNNING and
``cancelRequestedAt``; progress and checkpoint in the answer once a heartbeat wrote them; a
finished execution is still a 409."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.api.conftest import Api
from tests.factories import T0, stored
from tests.factories import definition as make_definition
from tickwheel.client.client import AsyncClient
from tickwheel.client.transports.http import HttpTransport
from tickwheel.domain.errors import Conflict
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.resources.executions import Progress
from tickwheel.store.protocol import AttemptResult

LEASE = timedelta(minutes=5)


async def test_the_sdk_cancels_a_running_execution_by_asking_its_worker(api: Api) -> None:
    await api.store.definition_insert(stored(make_definition()))
    sdk = AsyncClient(transport=HttpTransport("http://testserver", api.admin_key, http=api.http))
    e = await sdk.submit("greet", {"name": "Ada"})
    assert e.cancel_requested_at is None and "cancelRequestedAt" not in e.to_wire()
    [claimed] = await api.store.execution_claim_ready("w1", 1, LEASE, T0)
    assert claimed.fencing_token is not None
    progress = {"fraction": 0.5, "message": "half", "at": T0.isoformat()}
    await api.store.execution_beat(
        e.execution_id, claimed.fencing_token, LEASE, T0, progress=progress, checkpoint={"n": 5}
    )
    asked = await sdk.cancel(e.execution_id)
    assert asked.status is ExecutionStatus.RUNNING and asked.cancel_requested_at == T0
    assert asked.progress == Progress(fraction=0.5, message="half", at=T0)
    assert asked.checkpoint == {"n": 5}
    wire = asked.to_wire()
    assert wire["cancelRequestedAt"] == "2026-03-01T12:00:00Z"
    assert wire["progress"]["fraction"] == 0.5
    history = await api.http.get(f"/v1/executions/{e.execution_id}/history")
    assert [h["kind"] for h in history.json()["items"]] == ["cancel_requested"]
    # The worker stops it and reports CANCELLED; a cancel then is a Conflict.
    done = AttemptResult(
        e.execution_id,
        claimed.fencing_token,
        AttemptStatus.CANCELLED,
        ExecutionStatus.CANCELLED,
        error={"kind": "cancelled", "message": "cancelled while running"},
    )
    assert await api.store.attempt_finish(done, T0)
    with pytest.raises(Conflict, match="already finished"):
        await sdk.cancel(e.execution_id)
