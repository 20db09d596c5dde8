"""Dropping months of the partitioned executions table (docs/scaling.md): only months whose
executions all finished before the cut-off go, with everything that hung off them; a month with
live or recently finished executions is kept (``--force`` drops it); the final check runs under
the table's lock and gives up rather than stall it. And ``tickwheel db partitions ...``."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from tests.store.partition_helpers import (
    DAY,
    LEASE,
    NOW,
    Fresh,
    finished,
    fresh,
    fresh_url,
    names,
    new_at,
    scheduled,
)
from tickwheel.cli.main import app
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.store.postgres.partitions import ExecutionPartitions, PartitioningError
from tickwheel.store.protocol import AttemptResult

pytestmark = pytest.mark.postgres
__all__ = ["fresh", "fresh_url"]  # the fixtures, imported so that pytest finds them here

# -- drop -----------------------------------------------------------------------------------------


async def test_drop_removes_only_months_whose_executions_all_finished_before_the_cutoff(
    fresh: Fresh,
) -> None:
    store = fresh.store
    may = [
        await finished(
            store,
            datetime(2026, 5, d, tzinfo=UTC),
            datetime(2026, 5, d + 1, tzinfo=UTC),
            key=f"may-{d}",
        )
        for d in (3, 4)
    ]
    june_done = await finished(
        store, datetime(2026, 6, 3, tzinfo=UTC), datetime(2026, 6, 4, tzinfo=UTC)
    )
    june_future = await scheduled(store, datetime(2026, 6, 5, tzinfo=UTC), "june-future", 250)
    july_late = await finished(store, datetime(2026, 7, 3, tzinfo=UTC), NOW - 5 * DAY)
    august = await finished(
        store, datetime(2026, 8, 3, tzinfo=UTC), datetime(2026, 8, 4, tzinfo=UTC)
    )
    await fresh.parts.enable(NOW, ahead=1)
    cutoff_age = 90 * DAY  # cut-off 2026-08-17: May, June and July ended before it, August not

    dry = await fresh.parts.drop(NOW, cutoff_age, dry_run=True)
    assert [(o.partition, o.dropped) for o in dry] == [
        ("executions_p202605", False),
        ("executions_p202606", False),
        ("executions_p202607", False),
    ]
    assert "dry run" in dry[0].reason
    assert fresh.scalar("SELECT count(*) FROM executions") == 6

    outcomes = {o.partition: o for o in await fresh.parts.drop(NOW, cutoff_age)}
    assert outcomes["executions_p202605"].dropped
    june, july = outcomes["executions_p202606"], outcomes["executions_p202607"]
    assert not june.dropped and june.live == 1 and "1 not finished yet" in june.reason
    assert not july.dropped and july.recent == 1 and "finished after 2026-08-17" in july.reason
    assert "executions_p202605" not in names(await fresh.parts.list_partitions())
    # May went with everything that hung off it; nothing else was touched.
    for e in may:
        assert await store.execution_get("acme", e.execution_id) is None
    for table in ("attempts", "execution_outputs", "execution_keys"):
        assert fresh.rows_of(table, [e.execution_id for e in may]) == 0
    for kept in (june_done, june_future, july_late, august):
        assert await store.execution_get("acme", kept.execution_id) is not None
    assert len(await store.attempt_list("acme", june_done.execution_id)) == 1
    # May's keys are free again; June's far-future one still holds.
    [reused] = await store.execution_insert_many([new_at(now=NOW, key="may-3")])
    assert reused.created
    [held] = await store.execution_insert_many([new_at(now=NOW, key="june-future")])
    assert not held.created and held.execution.execution_id == june_future.execution_id

    # Forced: June goes, its unfinished execution with it.
    forced = await fresh.parts.drop(NOW, cutoff_age, force=True)
    assert [(o.partition, o.dropped) for o in forced] == [
        ("executions_p202606", True),
        ("executions_p202607", True),
    ]
    assert await store.execution_get("acme", june_future.execution_id) is None
    assert await store.execution_get("acme", august.execution_id) is not None


async def test_drop_refuses_a_month_revived_after_its_children_were_deleted(fresh: Fresh) -> None:
    """The final check runs under the parent's lock: a dead letter replayed between the first
    check and the drop keeps its month."""
    store = fresh.store
    created = datetime(2026, 5, 3, tzinfo=UTC)
    item = new_at(now=created)
    await store.execution_insert_many([item])
    [c] = await store.execution_claim_ready("w1", 1, LEASE, created)
    assert c.fencing_token is not None
    dead = AttemptResult(
        c.execution_id,
        c.fencing_token,
        AttemptStatus.FAILED,
        ExecutionStatus.FAILED,
        error={"kind": "error", "message": "x"},
    )
    assert await store.attempt_finish(dead, created)
    await fresh.parts.enable(NOW, ahead=0)

    real_delete = fresh.parts._delete_children

    async def replay_meanwhile(table: str, bounds: dict[str, object], batch: int) -> None:
        await real_delete(table, bounds, batch)
        if table == "execution_keys":
            assert await store.execution_replay("acme", item.execution_id, 1, NOW)

    fresh.parts._delete_children = replay_meanwhile  # type: ignore[method-assign]
    [outcome] = await fresh.parts.drop(NOW, 90 * DAY)
    assert not outcome.dropped and outcome.live == 1
    got = await store.execution_get("acme", item.execution_id)
    assert got is not None and got.status is ExecutionStatus.READY


async def test_drop_gives_up_on_a_busy_table_instead_of_stalling_it(fresh: Fresh) -> None:
    """The final step waits for the lock of executions only ``lock_timeout``: behind a long
    transaction it would otherwise queue every claim behind itself."""
    created = datetime(2026, 5, 3, tzinfo=UTC)
    done = await finished(fresh.store, created, created + DAY)
    await fresh.parts.enable(NOW, ahead=0)
    impatient = ExecutionPartitions(fresh.store.pool, lock_timeout="200ms")
    with psycopg.connect(fresh.url) as reader:
        reader.execute("SELECT count(*) FROM executions").fetchone()  # holds ACCESS SHARE
        with pytest.raises(PartitioningError, match="executions is busy: no lock within 200ms"):
            await impatient.drop(NOW, 90 * DAY)
    assert "executions_p202605" in names(await fresh.parts.list_partitions())
    assert await fresh.store.execution_get("acme", done.execution_id) is not None
    [outcome] = await impatient.drop(NOW, 90 * DAY)
    assert outcome.dropped


# -- the CLI --------------------------------------------------------------------------------------


def test_the_cli_enables_ensures_lists_and_drops(fresh_url: str) -> None:
    runner = CliRunner()
    url = ["--database-url", fresh_url]

    result = runner.invoke(app, ["db", "partitions", "list", *url])
    assert result.exit_code == 1
    assert "not partitioned" in result.output

    result = runner.invoke(app, ["db", "partitions", "enable", "--ahead", "1", *url])
    assert result.exit_code == 0, result.output
    assert "0 rows copied into 3 partitions" in result.output

    result = runner.invoke(app, ["db", "partitions", "ensure", "--ahead", "2", *url])
    assert result.exit_code == 0, result.output
    assert result.output.count("created") == 1 and result.output.count("exists") == 2

    result = runner.invoke(app, ["db", "partitions", "list", *url])
    assert result.exit_code == 0, result.output
    assert "executions_default" in result.output and result.output.count("executions_p") == 3

    result = runner.invoke(app, ["db", "partitions", "drop", "--older-than", "90d", *url])
    assert result.exit_code == 0, result.output
    assert "no partition older than 90d" in result.output

    result = runner.invoke(app, ["db", "partitions", "drop", "--older-than", "soon", *url])
    assert result.exit_code == 1
    assert "is not an age like 30d" in result.output


def test_the_cli_refuses_sqlite_without_creating_a_file(tmp_path: Path) -> None:
    path = tmp_path / "nothing.db"
    result = CliRunner().invoke(
        app, ["db", "partitions", "ensure", "--database-url", f"sqlite:///{path}"]
    )
    assert result.exit_code == 1
    assert "partitioning is a PostgreSQL option" in result.output
    assert not path.exists()
