"""The wire format did not change: the scripted session of ``wire_scenario`` (every route, its
successes and its errors) replayed against the current code answers byte for byte what the code
answered when the session was recorded."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import pytest
from fastapi.routing import APIRoute

from tests.api.wire_scenario import RECORDED, run_session
from tickwheel.api.routes import (
    cron,
    cron_manual,
    definitions,
    executions,
    health,
    metrics,
    workflows,
)
from tickwheel.resources.base import Resource


@pytest.fixture(scope="module")
def recorded() -> dict[str, list[dict[str, object]]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(RECORDED.glob("*.json"))}


async def test_every_answer_is_byte_for_byte_the_recorded_one(
    sqlite_template: Path, recorded: dict[str, list[dict[str, object]]]
) -> None:
    replayed = await run_session(sqlite_template)
    assert sorted(replayed) == sorted(recorded)
    for module, exchanges in recorded.items():
        assert len(replayed[module]) == len(exchanges), module
        for then, now in zip(exchanges, replayed[module], strict=True):
            assert now["request"] == then["request"], module
            assert (now["status"], now.get("body")) == (then["status"], then.get("body")), (
                f"{module}: {then['request']} answers differently"
            )


def test_the_recording_calls_every_route_of_the_api() -> None:
    requests = [
        str(exchange["request"]).split("?")[0]
        for path in RECORDED.glob("*.json")
        for exchange in json.loads(path.read_text())
    ]
    routes = [
        (method, route.path)
        for module in (cron, cron_manual, definitions, executions, health, metrics, workflows)
        for route in module.router.routes
        if isinstance(route, APIRoute)
        for method in route.methods or ()
    ]
    assert len(routes) == 36
    missing = [
        f"{method} {path}"
        for method, path in routes
        if not any(
            re.fullmatch(f"{method} " + re.sub(r"{[^}]+}", "[^/]+", path), r) for r in requests
        )
    ]
    assert missing == []


def test_every_recorded_answer_reads_into_its_model_and_back_unchanged(
    recorded: dict[str, list[dict[str, object]]],
) -> None:
    """What the SDK returns is the answer, nothing lost or added: each recorded success read
    into its route's response model (as the SDK reads it) dumps back to the same JSON, byte for
    byte (what ``to_wire()`` and the CLI's ``--json`` print)."""
    routes = [
        (method, re.sub(r"{[^}]+}", "[^/]+", route.path), _plain_answer(route.response_model))
        for module in (cron, cron_manual, definitions, executions, health, workflows)
        for route in module.router.routes
        if isinstance(route, APIRoute) and _plain_answer(route.response_model) is not None
        for method in route.methods or ()
    ]
    checked = 0
    for exchanges in recorded.values():
        for exchange in exchanges:
            status, body = exchange["status"], exchange.get("body")
            if not (isinstance(status, int) and 200 <= status < 300 and isinstance(body, str)):
                continue
            if not body.startswith("{"):
                continue  # /metrics is text
            method, _, target = str(exchange["request"]).partition(" ")
            path = target.split("?")[0]
            [model] = [m for verb, p, m in routes if verb == method and re.fullmatch(p, path)]
            assert issubclass(model, Resource), model
            again = model.from_wire(json.loads(body)).to_wire()
            text = json.dumps(again, separators=(",", ":"), ensure_ascii=False)
            assert text == body, exchange["request"]  # the same bytes: same keys, same order
            checked += 1
    assert checked > 60


def _plain_answer(model: object) -> type | None:
    """A route's model of the answer to a request that asks for nothing special: its model, or
    the first of a union (the batch's full answer; ``Prefer: return=minimal`` gets the other)."""
    if isinstance(model, type):
        return model
    first = next(iter(typing.get_args(model)), None)
    return first if isinstance(first, type) else None
