"""What the worker's per-attempt shortcuts must keep: an output is still sized (and a large one
still kept by reference) without a JSON encoding per attempt; the first heartbeats of many
attempts share one timer and each still starts a third of a lease after its attempt, and not at
all for an attempt that ended; the log fields bound per attempt are made only when a record is
logged, and are the same fields."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import pickle
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tickwheel.domain.models import Execution
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.engine.heartbeat import Heartbeats
from tickwheel.engine.outcomes import attempt_result, output_size
from tickwheel.engine.runners import JobContext, RunOutcome
from tickwheel.engine.runners.attempt_state import AttemptState
from tickwheel.engine.runners.base import job_context, succeeded
from tickwheel.observability.logs import bind, bind_execution, execution_fields, record_fields
from tickwheel.store.running_protocol import Beat

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def running(token: int = 7) -> Execution:
    return Execution(
        execution_id=uuid.uuid4(),
        tenant="acme",
        definition_uri="registry://jobs/job",
        definition_version=1,
        inputs={},
        execute_at=T0,
        status=ExecutionStatus.RUNNING,
        priority=0,
        attempt_count=2,
        max_attempts=3,
        shard_id=0,
        bucket_start=T0,
        created_at=T0,
        updated_at=T0,
        fencing_token=token,
    )


def compact_bytes(value: Any) -> int:
    """How the size was counted before: compact JSON, encoded."""
    return len(json.dumps(value, separators=(",", ":")).encode())


@pytest.mark.parametrize(
    "output",
    [{}, {"a": 1}, {"text": "héllo ☃ 😀"}, {"nested": {"list": [1, 2.5, None, True]}}, [], None],
)
def test_the_output_size_is_its_compact_json_in_bytes(output: Any) -> None:
    assert output_size(output) == compact_bytes(output)


@pytest.mark.parametrize("limit", [0, 1, 2])
def test_an_empty_output_is_by_reference_when_even_two_bytes_are_too_many(limit: int) -> None:
    outcome = RunOutcome(ok=True, output={})
    result = attempt_result(
        running(), None, outcome, max_inline_output=limit, now=T0, uniform=lambda a, b: a
    )
    assert result.output_size == 2
    assert (result.output_reference is not None) == (limit < 2)
    assert result.attempt_status is AttemptStatus.SUCCEEDED


def test_a_large_output_still_goes_by_reference_with_its_size() -> None:
    output = {"blob": "é" * 600}  # 600 characters, 3,600 bytes of JSON (each one is \\u00e9)
    execution = running()
    result = attempt_result(
        execution,
        None,
        RunOutcome(ok=True, output=output),
        max_inline_output=1000,
        now=T0,
        uniform=lambda a, b: a,
    )
    assert result.output_size == compact_bytes(output) > 1000
    assert result.output_reference == f"tickwheel://executions/{execution.execution_id}/output"
    assert result.output == output


class BeatStore:
    """Records each heartbeat write (the time since the test began) and answers it."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.beats: dict[uuid.UUID, list[float]] = {}

    async def execution_beat(
        self, execution_id: uuid.UUID, token: int, lease: timedelta, now: Any, **_: Any
    ) -> Beat:
        self.beats.setdefault(execution_id, []).append(time.monotonic() - self.began)
        return Beat(cancel_requested=False)

    async def wait_for(self, topic: Any, timeout: float) -> None:
        await asyncio.sleep(timeout)


async def test_first_beats_share_one_timer_and_come_a_third_of_a_lease_after_each_attempt() -> None:
    store = BeatStore()
    beats = Heartbeats(
        store,  # type: ignore[arg-type]
        timedelta(seconds=0.6),  # first beat 0.2 s after each attempt starts
        now=lambda: None,
        log=logging.getLogger("test"),
    )
    forever = asyncio.Event()
    tasks = []

    def attempt(execution: Execution) -> None:
        task = asyncio.ensure_future(forever.wait())
        tasks.append(task)
        beats.schedule(execution, 7, task, AttemptState())

    first, ended, later = running(), running(), running()
    attempt(first)
    attempt(ended)
    await asyncio.sleep(0.1)
    beats.stop(ended.execution_id)  # ended before its first beat: it never gets one
    attempt(later)  # due 0.1 s after the others
    await asyncio.sleep(0.15)  # 0.25 s in: the first is beating, the later one not yet
    assert list(store.beats) == [first.execution_id]
    await asyncio.sleep(0.15)  # 0.4 s in
    assert set(store.beats) == {first.execution_id, later.execution_id}
    assert 0.19 <= store.beats[first.execution_id][0] < 0.3
    assert 0.29 <= store.beats[later.execution_id][0] < 0.4
    assert ended.execution_id not in store.beats
    for execution in (first, later):
        beats.stop(execution.execution_id)
    forever.set()
    await asyncio.gather(*tasks)


async def test_an_attempt_after_an_empty_queue_or_a_shorter_lease_is_not_beaten_late() -> None:
    store = BeatStore()
    beats = Heartbeats(
        store,  # type: ignore[arg-type]
        timedelta(seconds=0.9),  # 0.3 s
        now=lambda: None,
        log=logging.getLogger("test"),
    )
    forever = asyncio.Event()
    task = asyncio.ensure_future(forever.wait())
    gone, after, shorter = running(), running(), running()
    beats.schedule(gone, 7, task, AttemptState())
    beats.stop(gone.execution_id)  # the queue is empty; its timer (0.3 s) is still set
    await asyncio.sleep(0.1)
    beats.schedule(after, 7, task, AttemptState())  # due at 0.4 s: the old timer comes first
    beats.lease = timedelta(seconds=0.3)  # 0.1 s: due at 0.2 s, before the timer set
    beats.schedule(shorter, 7, task, AttemptState())
    await asyncio.sleep(0.45)
    assert 0.19 <= store.beats[shorter.execution_id][0] < 0.3
    assert 0.39 <= store.beats[after.execution_id][0] < 0.5
    assert gone.execution_id not in store.beats
    for execution in (after, shorter):
        beats.stop(execution.execution_id)
    forever.set()
    await task


async def test_fields_bound_for_an_attempt_are_made_when_a_record_is_logged() -> None:
    execution = running(token=41)

    async def attempt() -> dict[str, Any]:
        bind({"job": "x", "attempt": 0})
        bind_execution(execution, "worker-1")
        record = logging.makeLogRecord({"msg": "hello", "extra_field": 5})
        return record_fields(record)

    fields = await asyncio.create_task(attempt())
    assert fields == {"job": "x", **execution_fields(execution, "worker-1"), "extra_field": 5}
    assert fields["attempt"] == 2 and fields["fencing_token"] == 41
    # The attempt's task had its own context: nothing leaked into this one.
    assert record_fields(logging.makeLogRecord({"msg": "x"})) == {}


def test_the_outcome_and_context_built_per_attempt_are_the_dataclasses_own() -> None:
    output = {"n": 1}
    fast = succeeded(output)
    assert fast == RunOutcome(ok=True, output=output) and fast.output is output
    assert type(fast) is RunOutcome and fast.error() is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.ok = False  # type: ignore[misc]
    execution_id, state = uuid.uuid4(), AttemptState({"at": 3})
    ctx = job_context(execution_id, 2, 41, "registry://jobs/job", 5, state)
    assert ctx == JobContext(
        execution_id=execution_id,
        attempt=2,
        fencing_token=41,
        definition_uri="registry://jobs/job",
        definition_version=5,
        state=state,
    )
    assert ctx.state is state and ctx.checkpoint == {"at": 3} and not ctx.cancelled
    assert pickle.loads(pickle.dumps(ctx)).checkpoint == {"at": 3}  # isolation: process
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.attempt = 3  # type: ignore[misc]
