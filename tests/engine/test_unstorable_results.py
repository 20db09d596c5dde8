"""What a handler hands back is stored safely, whatever it holds (issue 12): an output with NUL
or a lone surrogate fails the attempt clearly as invalid_output, and an error message with them
is stored with U+FFFD in their place. Either way every later read of the execution works."""

from __future__ import annotations

import uuid

import pytest

from tests.engine.test_services import Rig, register
from tickwheel.domain.states import ExecutionStatus
from tickwheel.store.protocol import Store

KINDS = ["nul", "surrogate"]


@pytest.mark.parametrize("kind", KINDS)
async def test_an_unstorable_output_fails_the_attempt_as_invalid_output(
    store: Store, kind: str
) -> None:
    await register(
        store, "odd", "unstorable_output", inputs={"kind": "string"}, outputs={"text": "string"}
    )
    rig = Rig(store)
    eid = uuid.UUID(await rig.submit("odd", kind=kind))
    assert await rig.work() == 1
    got = await rig.client.get(eid)
    assert got["status"] == str(ExecutionStatus.FAILED)
    assert got["error"]["kind"] == "invalid_output"
    assert got["error"]["errors"][0]["path"] == "outputs.text"
    assert got["output"] is None
    [attempt] = await rig.client.attempts(eid)
    assert attempt["error"]["kind"] == "invalid_output"


@pytest.mark.parametrize("kind", KINDS)
async def test_an_error_message_with_unstorable_text_is_stored_readably(
    store: Store, kind: str
) -> None:
    await register(store, "odd", "fails_unstorably", inputs={"kind": "string"}, outputs={})
    rig = Rig(store)
    eid = uuid.UUID(await rig.submit("odd", kind=kind))
    assert await rig.work() == 1
    got = await rig.client.get(eid)
    assert got["status"] == str(ExecutionStatus.RETRY_WAIT)
    assert "cannot read a\ufffdb" in got["error"]["message"]
    [attempt] = await rig.client.attempts(eid)
    assert "a\ufffdb" in attempt["error"]["message"]
    assert (got["error"]["message"] + str(attempt["error"])).encode("utf-8")
