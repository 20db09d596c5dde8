"""The pruner service and ``tickwheel prune``: retention by age, in batches, and a dry run that
only counts."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.cron_factories import audit, cron_job
from tests.factories import T0, new_execution
from tests.store.test_retention import _run
from tickwheel.cli.commands.prune import parse_age
from tickwheel.cli.main import app
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.states import ExecutionStatus
from tickwheel.engine.pruner import Pruner
from tickwheel.observability.metrics import Metrics
from tickwheel.services.settings import PrunerSettings
from tickwheel.store.factory import cron_store_for, open_store
from tickwheel.store.protocol import Store

DAY = timedelta(days=1)


async def test_the_pruner_keeps_the_retention_period_and_loops_in_batches(store: Store) -> None:
    for _ in range(5):
        await _run(store, T0 - 31 * DAY, ExecutionStatus.SUCCEEDED)
    young = await _run(store, T0 - 29 * DAY, ExecutionStatus.FAILED)
    clock = FakeClock(T0)
    pruner = Pruner(store, clock, settings=PrunerSettings(retention=30 * DAY, batch=2))
    pruner.metrics = Metrics()
    assert await pruner.run_once() == 5  # 2 + 2 + a short batch of 1
    assert await pruner.run_once() == 0
    assert pruner.metrics.value("tickwheel_executions_pruned_total") == 5
    clock.advance(days=2)
    assert await pruner.run_once() == 1  # now the young one is old enough too
    assert await store.execution_get("acme", young.execution_id) is None


def test_a_retention_of_zero_is_refused_by_the_service() -> None:
    with pytest.raises(ValueError, match="retention"):
        Pruner(None, settings=PrunerSettings(retention=timedelta(0)))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "age"),
    [
        ("30d", 30 * DAY),
        ("12h", timedelta(hours=12)),
        ("2w", 14 * DAY),
        ("90m", timedelta(minutes=90)),
    ],
)
def test_parse_age(text: str, age: timedelta) -> None:
    assert parse_age(text) == age


@pytest.mark.parametrize("text", ["30", "d", "-1d", "0d", "3 days"])
def test_parse_age_refuses_what_is_not_an_age(text: str) -> None:
    with pytest.raises(ValueError):
        parse_age(text)


def test_cli_prune_dry_run_counts_and_deletes_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ops.db'}"
    now = datetime.now(UTC)

    async def prepare() -> None:
        store = await open_store(url)
        try:
            await store.migrate()
            for _ in range(3):
                await _run(store, now - 40 * DAY, ExecutionStatus.SUCCEEDED)
            await _run(store, now - DAY, ExecutionStatus.SUCCEEDED)
            await store.execution_insert_many([new_execution(now=now - 40 * DAY)])  # READY
            job = cron_job(at=now - 40 * DAY)
            await cron_store_for(store).cron_job_insert(job, audit(job, at=now - 40 * DAY))
        finally:
            await store.close()

    async def counts() -> dict[ExecutionStatus, int]:
        store = await open_store(url)
        try:
            return await store.execution_count_by_status()
        finally:
            await store.close()

    asyncio.run(prepare())
    runner = CliRunner()
    args = ["prune", "--older-than", "30d", "--database-url", url]
    dry = runner.invoke(app, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would delete 3 executions" in dry.output and "dry run" in dry.output
    assert "would delete 1 cron history and audit rows" in dry.output
    assert asyncio.run(counts())[ExecutionStatus.SUCCEEDED] == 4

    done = runner.invoke(app, [*args, "--batch", "2"])
    assert done.exit_code == 0, done.output
    assert "deleted 3 executions" in done.output
    assert "deleted 1 cron history and audit rows" in done.output
    left = asyncio.run(counts())
    assert left[ExecutionStatus.SUCCEEDED] == 1 and left[ExecutionStatus.READY] == 1

    bad = runner.invoke(app, ["prune", "--older-than", "soon", "--database-url", url])
    assert bad.exit_code != 0 and "not an age" in bad.output


async def test_the_first_pass_waits_past_the_start(store: Store) -> None:
    """A process's start is for its first claims: the pruner's first pass comes ``first_after``
    later (a retention period is days long); stopped meanwhile, it ends without a pass."""
    pruner = Pruner(store, settings=PrunerSettings(first_after=3600))
    pruner.metrics = Metrics()
    running = asyncio.create_task(pruner.run())
    for _ in range(20):
        await asyncio.sleep(0)
    assert pruner.rounds == 0 and pruner._cron is None
    pruner.stop()
    await running
    assert pruner.rounds == 0
