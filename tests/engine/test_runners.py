"""run_attempt and the outcome it returns, and the python runner. The other runners have their
own test modules: test_command_runner, test_http_runner, test_container_runner."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.engine import jobs_for_tests as jobs
from tests.engine.helpers import EXECUTION_ID, RUNNERS, context, definition
from tickwheel.domain.definitions import PythonExecution
from tickwheel.engine.runners import JobContext, RunOutcome, run_attempt
from tickwheel.engine.runners.python import _cached_plan

JOBS = "tests.engine.jobs_for_tests"


def python(name: str) -> PythonExecution:
    return PythonExecution(f"{JOBS}:{name}")


# -- the outcome and run_attempt ------------------------------------------------------------------


def test_outcome_error_is_json_able_and_none_when_ok() -> None:
    failed = RunOutcome(ok=False, kind="error", message="boom", detail={"exit_code": 3})
    assert failed.error() == {"kind": "error", "message": "boom", "exit_code": 3}
    assert json.loads(json.dumps(failed.error())) == failed.error()
    assert RunOutcome(ok=True, output={}).error() is None
    with pytest.raises(ValueError, match="unknown failure kind"):
        RunOutcome(ok=False, kind="oops")
    with pytest.raises(ValueError, match="no failure kind"):
        RunOutcome(ok=True, kind="error")


async def test_a_type_without_runner_and_a_crashing_runner_become_outcomes() -> None:
    class Crashing:
        async def run(self, d: Any, inputs: dict[str, Any], ctx: JobContext) -> RunOutcome:
            raise RuntimeError("bug")

    d = definition(python("add"))
    outcome = await run_attempt(d, {}, context(), runners={})
    assert (outcome.kind, outcome.message) == ("permanent", "no runner for execution type 'python'")
    outcome = await run_attempt(d, {}, context(), runners={"python": Crashing()})
    assert outcome.kind == "error" and "RuntimeError: bug" in outcome.message


# -- python ---------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _release_sleepers() -> Iterator[None]:
    for event in (jobs.STARTED, jobs.RELEASE, jobs.FINISHED):
        event.clear()
    yield
    jobs.RELEASE.set()  # so that no test leaves a thread behind


@pytest.mark.parametrize("name", ["add", "async_add"])
async def test_python_sync_and_async_functions(name: str) -> None:
    outcome = await run_attempt(
        definition(python(name), sum="integer"), {"a": 2, "b": 3}, context()
    )
    assert outcome == RunOutcome(ok=True, output={"sum": 5})


async def test_python_context_by_name_or_annotation_and_dotted_attribute() -> None:
    d = definition(python("with_context"), name="string", execution_id="string", attempt="integer")
    outcome = await run_attempt(d, {"name": "x"}, context(attempt=3), runners=RUNNERS)
    assert outcome.output == {"name": "x", "execution_id": str(EXECUTION_ID), "attempt": 3}
    d = definition(python("annotated"), token="integer", uri="uri")
    outcome = await run_attempt(d, {}, context(), runners=RUNNERS)
    assert outcome.output == {"token": 41, "uri": "registry://jobs/job"}
    outcome = await run_attempt(
        definition(python("Jobs.double"), sum="integer"), {"x": 4}, context()
    )
    assert outcome.output == {"sum": 8}


async def test_signatures_are_read_once_per_function_and_still_checked() -> None:
    d = definition(python("add"), sum="integer")
    for a in range(3):
        assert (await run_attempt(d, {"a": a, "b": 1}, context(), runners=RUNNERS)).output == {
            "sum": a + 1
        }
    hits = _cached_plan.cache_info().hits
    assert (await run_attempt(d, {"a": 1, "b": 1}, context(), runners=RUNNERS)).output == {"sum": 2}
    assert _cached_plan.cache_info().hits > hits
    # Cached, the check still refuses inputs the function cannot take, for good.
    refused = await run_attempt(d, {"a": 1, "c": 2}, context(), runners=RUNNERS)
    assert (refused.ok, refused.kind) == (False, "permanent")
    # A callable object that cannot be hashed is checked without the cache.
    d = definition(python("unhashable"), sum="integer")
    assert (await run_attempt(d, {"x": 4}, context(), runners=RUNNERS)).output == {"sum": 5}


async def test_python_none_is_no_outputs_and_a_list_is_invalid() -> None:
    assert (
        await run_attempt(definition(python("nothing")), {}, context(), runners=RUNNERS)
    ).output == {}
    outcome = await run_attempt(definition(python("a_list")), {}, context(), runners=RUNNERS)
    assert outcome.kind == "invalid_output" and "must return a dict" in outcome.message


async def test_outputs_that_do_not_match_the_definition_are_invalid_output() -> None:
    d = definition(python("echo"), total="integer", note="string")
    outcome = await run_attempt(d, {"total": "7", "extra": 1}, context(), runners=RUNNERS)
    assert outcome.kind == "invalid_output"
    for path in ("outputs.total", "outputs.note", "outputs.extra"):
        assert path in outcome.message
    assert {e["path"] for e in outcome.error()["errors"]} == {  # type: ignore[index]
        "outputs.total",
        "outputs.note",
        "outputs.extra",
    }


async def test_python_exception_is_retryable_with_type_and_traceback_tail() -> None:
    outcome = await run_attempt(
        definition(python("fails")), {"depth": 40}, context(), runners=RUNNERS
    )
    assert outcome.kind == "error" and outcome.message == "ValueError: the ledger is locked"
    assert outcome.detail is not None and outcome.detail["exception"] == "ValueError"
    lines = outcome.detail["traceback"].splitlines()
    assert len(lines) == 20 and lines[-1] == "ValueError: the ledger is locked"
    outcome = await run_attempt(definition(python("exits")), {}, context(), runners=RUNNERS)
    assert outcome.kind == "error" and "SystemExit" in outcome.message


async def test_python_permanent_error_is_permanent() -> None:
    outcome = await run_attempt(
        definition(python("fails_for_good")), {}, context(), runners=RUNNERS
    )
    assert (outcome.kind, outcome.message) == ("permanent", "the account is closed")
    assert outcome.detail is not None and outcome.detail["details"] == {"account": 7}


@pytest.mark.parametrize(
    ("entrypoint", "expected"),
    [
        ("tests.engine.no_such_module:job", "cannot import module 'tests.engine.no_such_module'"),
        (f"{JOBS}:missing", "no attribute 'missing'"),
        (f"{JOBS}:STARTED.set", None),  # callable, but takes no inputs named 'a'
    ],
)
async def test_python_entrypoint_that_cannot_run_is_permanent(
    entrypoint: str, expected: str | None
) -> None:
    outcome = await run_attempt(
        definition(PythonExecution(entrypoint)), {"a": 1}, context(), runners=RUNNERS
    )
    assert outcome.kind == "permanent" and entrypoint in outcome.message
    assert expected is None or expected in outcome.message


async def test_python_sync_timeout_leaves_the_thread_and_ignores_its_result() -> None:
    started = time.monotonic()
    outcome = await run_attempt(
        definition(python("sync_sleeper"), 0.2), {}, context(), runners=RUNNERS
    )
    assert outcome.kind == "timeout" and "0.2 s" in outcome.message
    assert time.monotonic() - started < 2
    assert jobs.STARTED.is_set() and not jobs.FINISHED.is_set()  # the thread runs on
    jobs.RELEASE.set()
    assert await asyncio.to_thread(jobs.FINISHED.wait, 5)


async def test_python_async_timeout_cancels_the_coroutine() -> None:
    jobs.CANCELLED.clear()
    outcome = await run_attempt(
        definition(python("async_sleeper"), 0.2), {}, context(), runners=RUNNERS
    )
    assert outcome.kind == "timeout" and jobs.CANCELLED == ["async_sleeper"]
