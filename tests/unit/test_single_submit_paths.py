"""A single submission's shorter ways (docs/scaling.md, "A single submission's own path"), each
held to what it stands for: the value kept from the last submission is the one the plain
computation gives, and nothing one answer holds is shared with another's."""

from __future__ import annotations

import dataclasses
import os
from datetime import UTC, datetime, timedelta, timezone

import pytest

from tests.factories import definition
from tickwheel.app.definition_cache import DefinitionCache
from tickwheel.client.requests import submit_request
from tickwheel.domain.sharding import bucket_start
from tickwheel.domain.submission import SubmitRequest, prepare_execution
from tickwheel.observability import tracing
from tickwheel.resources.executions import Execution as ExecutionInfo
from tickwheel.resources.executions import execution_fields
from tickwheel.store.postgres.rows import _instant_now_text, execution_from_new
from tickwheel.store.protocol import SHARED, StoredDefinition

START = datetime(2026, 3, 1, 12, 0, 59, 999_999, tzinfo=UTC)
ODD = timezone(timedelta(hours=5, minutes=30))


def _instants() -> list[datetime]:
    """New objects each (as the clock gives them), across second and minute boundaries, one
    without microseconds, one with another offset, and back in time."""
    steps = [0, 1, 2, 1_000_000, 59_999_999, 60_000_000, -1, -60_000_001]
    made = [START + timedelta(microseconds=s) for s in steps]
    made += [START.replace(microsecond=0), START.astimezone(ODD), START]
    return made


def test_each_single_submissions_bucket_is_its_instants() -> None:
    """The last bucket is kept for every instant of its minute (in UTC), compared by value."""
    d = definition(inputs={"name": "string"})
    for now in _instants():
        request = SubmitRequest(definition_uri="registry://jobs/greet", inputs={"name": "a"})
        item = prepare_execution(request, d, "acme", now)
        assert item.bucket_start == bucket_start(now)
        assert item.bucket_start.tzinfo is UTC


def test_a_creation_instants_text_is_its_isoformat() -> None:
    for now in _instants():
        assert _instant_now_text(now) == now.isoformat()


def test_a_request_without_options_is_what_its_init_makes() -> None:
    at = datetime(2026, 3, 1, 12, tzinfo=UTC)
    for args in [("greet", None, None, None), ("registry://jobs/x", {"a": 1}, at, "k-1")]:
        made = submit_request(*args)
        name, inputs, execute_at, key = args
        expected = SubmitRequest(
            definition_uri=name if "://" in name else f"registry://jobs/{name}",
            inputs=inputs or {},
            execute_at=execute_at,
            idempotency_key=key,
        )
        assert made == expected and made.trace_context is None
        assert list(vars(made).items()) == list(vars(expected).items())
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.priority = 1  # type: ignore[misc]


def test_the_tracing_check_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Read at every submission, not once: set or unset at any time, it is what
    ``os.environ`` says."""
    monkeypatch.delenv(tracing.PROVIDER_ENV, raising=False)
    assert not tracing._named_in_environment()
    monkeypatch.setenv(tracing.PROVIDER_ENV, "sdk_tracer_provider")
    assert tracing._named_in_environment()
    monkeypatch.delenv(tracing.PROVIDER_ENV)
    assert not tracing._named_in_environment()
    monkeypatch.setattr(os, "environ", {tracing.PROVIDER_ENV: "x"})  # a stand-in: asked as is
    assert tracing._named_in_environment()


def test_an_answer_made_alone_has_a_set_of_fields_of_its_own() -> None:
    """The sets are kept per shape, but each answer alone gets a copy: one that a caller
    changes changes no other (as before, when each was made afresh)."""
    d = definition(inputs={"name": "string"})
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    request = SubmitRequest(definition_uri="registry://jobs/greet", inputs={"name": "a"})
    executions = [execution_from_new(prepare_execution(request, d, "acme", now)) for _ in "ab"]
    first, second = (ExecutionInfo.of(e) for e in executions)
    validated = ExecutionInfo.model_validate(execution_fields(executions[0]))
    assert first.model_fields_set == second.model_fields_set == validated.model_fields_set
    assert first.model_fields_set is not second.model_fields_set
    first.model_fields_set.add("progress")
    assert "progress" not in ExecutionInfo.of(executions[1]).model_fields_set


async def test_a_fresh_entry_is_found_without_loading_and_an_old_one_is_not() -> None:
    now = [0.0]
    cache = DefinitionCache(ttl=1.0, monotonic=lambda: now[0])
    stored = StoredDefinition(definition(), "hash", datetime(2026, 3, 1, tzinfo=UTC), SHARED)
    key = ("acme", "greet", None)
    assert cache.fresh(key) is None

    async def load() -> StoredDefinition:
        return stored

    assert await cache.get(key, load) is stored
    assert cache.fresh(key) is stored
    now[0] = 1.0  # its time is up: fresh says so, get loads again
    assert cache.fresh(key) is None
