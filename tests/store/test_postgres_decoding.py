"""The PostgreSQL store's decoding of an executions row (``store/postgres/rows.py``): the worker
decodes every row it claims through a decoder written out for ``Execution``'s fields, which must
give exactly what the plain decoding (each field converted, then ``Execution(...)``) gives."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tickwheel.domain.concurrency import Concurrency
from tickwheel.domain.jsonvalues import UNREADABLE
from tickwheel.domain.models import Execution
from tickwheel.domain.states import ExecutionStatus
from tickwheel.store.execution_columns import EXECUTION, Kind, column
from tickwheel.store.postgres.rows import execution_from_row, execution_from_row_reference

BERLIN = ZoneInfo("Europe/Berlin")
AT = datetime(2026, 3, 29, 1, 30, tzinfo=BERLIN)  # the session's TimeZone need not be UTC


def full_row() -> dict[str, Any]:
    """A row with every column set, instants in a session zone that is not UTC."""
    values: dict[str, Any] = {
        Kind.PLAIN: None,
        Kind.ID: uuid.uuid4(),
        Kind.INSTANT: AT,
        Kind.OPTIONAL_INSTANT: AT + timedelta(hours=1),
        Kind.STATUS: "RUNNING",
        Kind.OBJECT: {"name": "Ada"},
        Kind.JSON: {"any": [1, 2]},
    }
    row: dict[str, Any] = {}
    for i, (name, kind) in enumerate(EXECUTION):
        row[column(name)] = values[kind] if kind is not Kind.PLAIN else f"text-{i}"
    for name in ("definition_version", "priority", "attempt_count", "max_attempts", "shard_id"):
        row[name] = 3
    row["fencing_token"] = 41
    row.update(concurrency_key="k", concurrency_limit=2, concurrency_order="fifo")
    row.update(limited_seen=False, tenants_seen=False)  # the claim's extra columns
    return row


def sparse_row() -> dict[str, Any]:
    """Every optional column NULL, inputs unreadable (a row stored before the checks)."""
    row = full_row()
    for name, kind in EXECUTION:
        if kind in (Kind.OPTIONAL_INSTANT, Kind.JSON):
            row[column(name)] = None
    for name in ("idempotency_key", "request_fingerprint", "lease_owner", "output_reference"):
        row[name] = None
    row.update(concurrency_key=None, concurrency_limit=None, concurrency_order=None)
    row["fencing_token"] = None
    row["input_snapshot"] = UNREADABLE
    return row


@pytest.mark.parametrize("make", [full_row, sparse_row], ids=["full", "sparse"])
def test_the_claims_decoder_gives_what_the_plain_decoding_gives(make: Any) -> None:
    row = make()
    got, want = execution_from_row(row), execution_from_row_reference(row)
    assert got == want
    assert type(got) is Execution
    for field in dataclasses.fields(Execution):  # not only equal: the same types, zones included
        value = getattr(got, field.name)
        assert type(value) is type(getattr(want, field.name)), field.name
        if isinstance(value, datetime):
            assert value.tzinfo is UTC, field.name
    assert got.status is ExecutionStatus.RUNNING
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.priority = 1  # type: ignore[misc]


def test_the_decoder_converts_each_instant_to_utc_and_reads_the_concurrency_group() -> None:
    got = execution_from_row(full_row())
    assert got.execute_at == AT and got.execute_at.tzinfo is UTC
    assert got.execute_at.utcoffset() == timedelta(0) and got.execute_at.hour == 0
    assert got.concurrency == Concurrency("k", 2, "fifo")
    assert got.inputs == {"name": "Ada"}
    assert execution_from_row(sparse_row()).inputs == {"unreadable": UNREADABLE}


def test_an_unknown_status_is_refused_as_before() -> None:
    row = full_row() | {"status": "NAPPING"}
    with pytest.raises(ValueError, match="NAPPING"):
        execution_from_row_reference(row)
    with pytest.raises(ValueError, match="NAPPING"):
        execution_from_row(row)


def test_a_missing_column_is_an_error_not_a_default() -> None:
    row = full_row()
    del row["deadline"]
    with pytest.raises(KeyError):
        execution_from_row(row)


def test_an_instant_in_a_fixed_offset_comes_back_in_utc() -> None:
    row = full_row() | {"started_at": datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=5)))}
    got = execution_from_row(row)
    assert got.started_at == datetime(2026, 1, 1, 7, tzinfo=UTC) and got.started_at.tzinfo is UTC
