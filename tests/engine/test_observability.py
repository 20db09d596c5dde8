"""Metrics and structured logs of the engine after a scripted run (fake clock, ``run_once``, no
sleeping on time), on both backends: the counters and histograms hold exactly the expected
values, and every log line about an execution names it."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from tests.engine.test_services import Rig, register
from tickwheel.domain.submission import SubmitRequest
from tickwheel.observability.logs import JsonFormatter, TextFormatter, configure_logging
from tickwheel.observability.metrics import Metrics, process_metrics
from tickwheel.store.protocol import Store

GATE: dict[str, asyncio.Event] = {}
HERE = "tests.engine.test_observability"


async def gated() -> dict[str, Any]:
    """Runs until the test releases it, so the test can move time or steal the lease meanwhile."""
    GATE["started"].set()
    await GATE["release"].wait()
    return {}


def chatty() -> dict[str, Any]:
    """A sync job (run in a thread) that logs without knowing its execution."""
    logging.getLogger("tests.jobs").warning("charging the card")
    return {}


def _open_gate() -> None:
    GATE["started"] = asyncio.Event()
    GATE["release"] = asyncio.Event()


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
async def rig(store: Store, metrics: Metrics) -> Rig:
    await register(store, "add", "add")
    await register(
        store, "flaky", "fails", inputs={"depth": {"type": "integer", "default": 0}}, outputs={}
    )
    doc = {"inputs": {}, "outputs": {}, "execution": {"type": "python", "entrypoint": ""}}
    for name in ("gated", "chatty"):
        doc["execution"] = {"type": "python", "entrypoint": f"{HERE}:{name}"}
        await register(store, name, name, **doc)
    rig = Rig(store)
    for service in (rig.scheduler, rig.worker, rig.reaper):
        service.metrics = metrics  # a registry of this test's own: exact values
    return rig


async def _gated_claim(rig: Rig) -> None:
    _open_gate()
    assert await rig.worker.run_once() == 1
    await asyncio.wait_for(GATE["started"].wait(), 5)


async def test_metrics_after_a_scripted_run(rig: Rig, metrics: Metrics) -> None:
    submitted = process_metrics().value("tickwheel_executions_submitted_total", definition="add")
    await rig.submit("add")
    await rig.submit("flaky")
    await rig.submit("add", delay=10)
    keyed = SubmitRequest("registry://jobs/add", idempotency_key="order-7")
    assert (await rig.client.submit(keyed))[1]
    assert not (await rig.client.submit(keyed))[1]  # a repeat: not a new submission
    rig.clock.advance(0.25)
    assert await rig.work() == 3  # both adds succeed, flaky waits 2 s to retry
    rig.clock.advance(9.75)
    assert await rig.scheduler.run_once() == 2  # the delayed add and flaky's retry
    assert await rig.work() == 2
    rig.clock.advance(4)
    assert await rig.scheduler.run_once() == 1
    assert await rig.work() == 1  # flaky's third attempt: the dead letter
    # A gated job: 3 s between claim and result.
    await rig.submit("gated")
    await _gated_claim(rig)
    rig.clock.advance(3)
    GATE["release"].set()
    await rig.worker.drain()
    # Another: its lease runs out while it runs, the reaper recovers it, its result is refused.
    await rig.submit("gated")
    await _gated_claim(rig)
    rig.clock.advance(31)
    assert await rig.reaper.run_once() == 1
    GATE["release"].set()
    await rig.worker.drain()

    value = metrics.value
    after = process_metrics().value("tickwheel_executions_submitted_total", definition="add")
    assert after - submitted == 3  # two plus the keyed one; not its repeat
    # Promoted by definition: the delayed add; flaky's two retries.
    assert value("tickwheel_executions_promoted_total", definition="add") == 1
    assert value("tickwheel_executions_promoted_total", definition="flaky") == 2
    assert value("tickwheel_executions_claimed_total", definition="add") == 3
    assert value("tickwheel_executions_claimed_total", definition="flaky") == 3
    assert value("tickwheel_executions_claimed_total", definition="gated") == 2
    assert value("tickwheel_executions_succeeded_total", definition="add") == 3
    assert value("tickwheel_executions_succeeded_total", definition="gated") == 1
    assert value("tickwheel_executions_failed_total", definition="flaky") == 1
    # Lateness of first attempts only: add 0.25 s and 0 s (the keyed one 0.25 s), flaky 0.25 s.
    assert value("tickwheel_scheduling_lateness_seconds_count", definition="add") == 3
    assert value("tickwheel_scheduling_lateness_seconds_sum", definition="add") == 0.5
    assert value("tickwheel_scheduling_lateness_seconds_count", definition="flaky") == 1
    assert value("tickwheel_scheduling_lateness_seconds_sum", definition="flaky") == 0.25
    assert value("tickwheel_scheduling_lateness_seconds_bucket", definition="add", le="0.005") == 1
    duration = "tickwheel_attempt_duration_seconds"
    assert value(f"{duration}_count", definition="flaky", outcome="failed") == 3
    assert value(f"{duration}_count", definition="gated", outcome="succeeded") == 1
    assert value(f"{duration}_sum", definition="gated", outcome="succeeded") == 3.0
    assert value(f"{duration}_bucket", definition="gated", outcome="succeeded", le="1.0") == 0
    assert value(f"{duration}_bucket", definition="gated", outcome="succeeded", le="5.0") == 1
    assert value("tickwheel_lease_expirations_total") == 1
    assert value("tickwheel_stale_fencing_token_rejections_total") == 1
    assert rig.worker.stale_writes == 1


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """Every tickwheel and job log record, as JSON lines, into a string."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    loggers = [logging.getLogger(n) for n in ("tickwheel", "tests.jobs")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    yield stream
    for lg, level in zip(loggers, levels, strict=True):
        lg.removeHandler(handler)
        lg.setLevel(level)


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


async def test_every_log_line_about_an_execution_names_it(rig: Rig, json_log: io.StringIO) -> None:
    eid = await rig.submit("chatty")
    await rig.work()
    stolen = await rig.submit("gated")
    await _gated_claim(rig)
    rig.clock.advance(31)
    await rig.reaper.run_once()
    GATE["release"].set()
    await rig.worker.drain()

    lines = _lines(json_log)
    about = {
        "claimed": [line for line in lines if line["message"] == "claimed"],
        "finished": [line for line in lines if "finished" in line["message"]],
        "job": [line for line in lines if line["logger"] == "tests.jobs"],
        "reaper": [line for line in lines if line["logger"] == "tickwheel.reaper"],
        "stale": [line for line in lines if "dropped" in line["message"]],
    }
    assert all(about.values()), about
    for kind, found in about.items():
        for line in found:
            assert set(line) >= {"time", "level", "logger", "message"}, line
            assert line["execution_id"] in (eid, stolen), (kind, line)
            assert line["attempt"] == 1 and isinstance(line["fencing_token"], int), line
            assert line["worker_id"] == "w1", line  # the reaper names the lease's owner
    [job] = about["job"]
    assert job == {**job, "execution_id": eid, "worker_id": "w1", "level": "WARNING"}
    [reaped] = about["reaper"]
    assert reaped["execution_id"] == stolen and reaped["worker_id"] == "w1"
    assert reaped["message"] == (
        "attempt 1 abandoned: lease of w1 expired (lost attempt 1); execution RETRY_WAIT"
    )


async def test_a_failed_attempt_is_logged_at_warning_with_its_error(
    rig: Rig, json_log: io.StringIO
) -> None:
    eid = await rig.submit("flaky")
    await rig.work()
    lines = [line for line in _lines(json_log) if line["logger"] == "tickwheel.worker"]
    [failed] = [line for line in lines if line["level"] == "WARNING"]
    assert failed["message"] == (
        "attempt 1 FAILED (error): ValueError: the ledger is locked; execution RETRY_WAIT"
    )
    assert failed["execution_id"] == eid and failed["attempt"] == 1
    assert failed["worker_id"] == "w1" and isinstance(failed["fencing_token"], int)


def test_configure_logging_picks_json_off_a_terminal_and_text_on_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        stream = io.StringIO()  # not a terminal
        monkeypatch.delenv("TICKWHEEL_LOG_FORMAT", raising=False)
        handler = configure_logging("info", stream=stream)
        assert isinstance(handler.formatter, JsonFormatter)
        logging.getLogger("tickwheel.test").info(
            "hello %s", "there", extra={"execution_id": "e-1", "attempt": 2}
        )
        line = json.loads(stream.getvalue())
        assert line["message"] == "hello there" and line["level"] == "INFO"
        assert line["execution_id"] == "e-1" and line["attempt"] == 2
        assert "fencing_token" not in line  # only the fields that were given
        monkeypatch.setenv("TICKWHEEL_LOG_FORMAT", "text")
        handler = configure_logging("info", stream=io.StringIO())
        assert isinstance(handler.formatter, TextFormatter)
        assert isinstance(configure_logging("info", json=True).formatter, JsonFormatter)
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in saved[0]:
            root.addHandler(h)
        root.setLevel(saved[1])
