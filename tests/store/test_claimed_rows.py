"""What a claim hands the worker. On PostgreSQL the claim returns only the columns an attempt
reads, as tuple rows (``store/postgres/claimed_rows.py``): the execution it decodes
must still be the row's, field for field, except the results of earlier attempts, which it
leaves out (``CLAIM_LEAVES_OUT``). And the worker's statements must stay within psycopg's cache
of converted queries, or each claim pays ~120 µs to parse its placeholders again."""

from __future__ import annotations

import dataclasses
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from psycopg import _queries

from tests.factories import T0, new_execution
from tickwheel.domain.concurrency import Concurrency
from tickwheel.domain.jsonvalues import UNREADABLE
from tickwheel.domain.models import Execution
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.store.postgres.claimed_rows import (
    CLAIM_LEAVES_OUT,
    CLAIMED_COLUMNS,
    claimed_from_row,
)
from tickwheel.store.postgres.claims import HOT_STATEMENTS
from tickwheel.store.postgres.rows import execution_from_row_reference
from tickwheel.store.protocol import AttemptResult, Store
from tickwheel.store.sqlfile import load_queries

LEASE = timedelta(seconds=30)
BERLIN = ZoneInfo("Europe/Berlin")
AT = datetime(2026, 3, 29, 1, 30, tzinfo=BERLIN)  # the session's TimeZone need not be UTC


def _full_row() -> dict[str, Any]:
    """A whole executions row (as ``SELECT *`` gives it), every column set."""
    later = AT + timedelta(hours=1)
    return {
        "execution_id": uuid.uuid4(),
        "tenant": "acme",
        "definition_uri": "registry://jobs/greet",
        "definition_version": 3,
        "input_snapshot": {"name": "Ada"},
        "execute_at": AT,
        "status": "RUNNING",
        "priority": 5,
        "attempt_count": 2,
        "max_attempts": 4,
        "shard_id": 7,
        "bucket_start": AT,
        "created_at": AT,
        "updated_at": later,
        "idempotency_key": "key-1",
        "request_fingerprint": "f" * 64,
        "next_attempt_at": later,
        "ready_at": later,
        "lease_owner": "w1",
        "lease_expires_at": later,
        "fencing_token": 41,
        "output": {"earlier": True},
        "output_reference": "ref",
        "error": {"kind": "transient"},
        "started_at": AT,
        "finished_at": later,
        "cancel_requested_at": later,
        "progress": {"fraction": 0.5},
        "checkpoint": {"page": 9},
        "trace_context": {"traceparent": "00-abc"},
        "start_by": later,
        "deadline": later,
        "concurrency_key": "k",
        "concurrency_limit": 2,
        "concurrency_order": "fifo",
    }


def _claimed(row: dict[str, Any], *extra: Any) -> Execution:
    return claimed_from_row((*(row[c] for c in CLAIMED_COLUMNS), *extra), "w1")


def _unclaimed_fields(got: Execution, want: Execution) -> None:
    """``got`` is ``want`` except the fields a claim leaves out, which are None."""
    for field in dataclasses.fields(Execution):
        value = getattr(got, field.name)
        if field.name in CLAIM_LEAVES_OUT:
            assert value is None, field.name
            continue
        assert value == getattr(want, field.name), field.name
        assert type(value) is type(getattr(want, field.name)), field.name
        if isinstance(value, datetime):
            assert value.tzinfo is UTC, field.name


def test_a_claimed_row_decodes_to_the_row_less_the_results_of_earlier_attempts() -> None:
    row = _full_row()
    got = _claimed(row, 0, False)  # the unlimited statement's two flags come after
    _unclaimed_fields(got, execution_from_row_reference(row))
    assert got.status is ExecutionStatus.RUNNING and got.lease_owner == "w1"
    assert got.concurrency == Concurrency("k", 2, "fifo")
    assert got.execute_at == AT and got.execute_at.hour == 0  # 01:30 in Berlin, in UTC
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.priority = 1  # type: ignore[misc]


def test_a_sparse_claimed_row_keeps_its_nulls_and_unreadable_inputs() -> None:
    nulls = ["idempotency_key", "cancel_requested_at", "checkpoint", "trace_context", "start_by"]
    nulls += ["deadline", "concurrency_key", "concurrency_limit", "concurrency_order"]
    row = _full_row() | dict.fromkeys(nulls)
    row["input_snapshot"] = UNREADABLE
    got = _claimed(row)
    _unclaimed_fields(got, execution_from_row_reference(row))
    assert got.inputs == {"unreadable": UNREADABLE} and got.concurrency is None


def _returning(name: str) -> list[str]:
    # As loaded: the claims share their RETURNING list through a fragment (store/sqlfile.py).
    body = load_queries("tickwheel.store.postgres.sql")[name]
    [listed] = re.findall(r"RETURNING (e\..*?)\n\),", body, re.DOTALL)
    return [c.strip().removeprefix("e.") for c in listed.split(",")]


@pytest.mark.parametrize(
    "name",
    [
        "execution_claim_ready",
        "execution_claim_ready_unlimited",
        "execution_claim_ready_direct",
        "execution_claim_ready_ordered",
    ],
)
def test_each_claim_returns_the_columns_the_decoder_reads_in_its_order(name: str) -> None:
    assert _returning(name) == list(CLAIMED_COLUMNS)


def test_the_worker_statements_fit_psycopgs_cache_of_converted_queries() -> None:
    # The fair claim (execution_claim_ready) is longer still; it runs only while several
    # tenants have READY work, and is planned on every run anyway (claims.py).
    _, unlimited, direct, ordered, finish = HOT_STATEMENTS
    for sql in (unlimited, direct, ordered, finish):
        assert len(sql.encode()) <= _queries.MAX_CACHED_STATEMENT_LENGTH


async def test_a_claim_hands_the_worker_the_stored_row_of_what_it_reads(store: Store) -> None:
    """Both backends: after a failed attempt (its error and next attempt stored) and with every
    optional field a worker reads set, the claimed execution is the stored row of those."""
    item = dataclasses.replace(
        new_execution(key="k-1", now=T0),
        trace_context={"traceparent": "00-abc"},
        start_by=T0 + timedelta(hours=1),
        deadline=T0 + timedelta(hours=2),
        concurrency=Concurrency("g", 3, "fifo"),
    )
    await store.execution_insert_many([item])
    [first] = await store.execution_claim_ready("w1", 1, LEASE, T0)
    assert first.fencing_token is not None
    retry = AttemptResult(
        first.execution_id,
        first.fencing_token,
        AttemptStatus.FAILED,
        ExecutionStatus.RETRY_WAIT,
        error={"kind": "transient", "message": "again"},
        next_attempt_at=T0,
    )
    assert await store.attempt_finish_many([retry], T0) == [True]
    await store.execution_promote_due(range(1024), 10, T0 + timedelta(seconds=1))
    [claimed] = await store.execution_claim_ready("w2", 1, LEASE, T0 + timedelta(seconds=2))
    stored = await store.execution_get("acme", claimed.execution_id)
    assert stored is not None
    assert claimed.attempt_count == 2 and claimed.fencing_token == stored.fencing_token
    for field in dataclasses.fields(Execution):
        if field.name not in CLAIM_LEAVES_OUT:
            assert getattr(claimed, field.name) == getattr(stored, field.name), field.name
    assert claimed.status is ExecutionStatus.RUNNING and claimed.lease_owner == "w2"
