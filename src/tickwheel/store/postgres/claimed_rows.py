"""The claim's rows (sql/claims.sql) to the executions a worker runs.

Kept apart from ``rows.py``, which decodes whole rows: a worker decodes every row it claims, so
a claim returns fewer columns, as tuples (``CLAIMED_COLUMNS`` says why)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from tickwheel.domain.concurrency import Concurrency
from tickwheel.domain.fast_init import filled
from tickwheel.domain.jsonvalues import readable_object
from tickwheel.domain.models import Execution
from tickwheel.domain.states import ExecutionStatus
from tickwheel.store.execution_columns import EXECUTION, column

# rows.py checks, on import, that an Execution may be filled in through its __dict__.
from tickwheel.store.postgres import rows as _rows  # noqa: F401

CLAIMED_COLUMNS = (
    "execution_id",
    "tenant",
    "definition_uri",
    "definition_version",
    "input_snapshot",
    "execute_at",
    "priority",
    "attempt_count",
    "max_attempts",
    "shard_id",
    "bucket_start",
    "created_at",
    "updated_at",
    "idempotency_key",
    "ready_at",
    "lease_expires_at",
    "fencing_token",
    "started_at",
    "cancel_requested_at",
    "checkpoint",
    "trace_context",
    "start_by",
    "deadline",
    "concurrency_key",
    "concurrency_limit",
    "concurrency_order",
)
"""The columns a claim returns (sql/claims.sql's RETURNING, in this order), as tuple rows.

Every column of ``executions`` came back as a dict row and was decoded whole: with psycopg's
parsing, about 14 µs of the worker's CPU a row, for 32 values of which an attempt reads 16.
Tuples of these (no dict per row, no column nobody reads parsed) take less than half that.
Left out: what the claim knows already (the status is RUNNING, the lease owner is the claimer),
and the results of earlier attempts and the request's fingerprint (``CLAIM_LEAVES_OUT``), which
a new attempt never reads. Every required field of ``Execution`` is here, so a claimed execution
says nothing untrue of itself but those, which are None (``execution_get`` has the whole row)."""

CLAIM_LEAVES_OUT = frozenset(
    {
        "request_fingerprint",
        "next_attempt_at",
        "output",
        "output_reference",
        "error",
        "finished_at",
        "progress",
    }
)
"""The fields a claimed execution holds as None whatever the row says (``CLAIMED_COLUMNS``)."""

_RUNNING = ExecutionStatus.RUNNING


def claimed_from_row(r: Sequence[Any], worker_id: str) -> Execution:
    """A claimed execution from its tuple row (``CLAIMED_COLUMNS``, then anything) and the
    claimer's id.

    Filled in like ``execution_from_row``: straight into the instance's ``__dict__``, which is
    what ``Execution``'s ``__init__`` leaves behind (``_execution_decoder`` checks it may). The
    instants a claim always sets (its lease, its start, its update) are never NULL. Converting
    an instant to UTC is free when the session's TimeZone is UTC, as every pool's
    is (``pool.SESSION_UTC``): ``astimezone`` then returns the value itself."""
    return filled(
        Execution,
        {
            "execution_id": r[0],
            "tenant": r[1],
            "definition_uri": r[2],
            "definition_version": r[3],
            "inputs": i if type(i := r[4]) is dict else readable_object(i),
            "execute_at": r[5].astimezone(UTC),
            "status": _RUNNING,
            "priority": r[6],
            "attempt_count": r[7],
            "max_attempts": r[8],
            "shard_id": r[9],
            "bucket_start": r[10].astimezone(UTC),
            "created_at": r[11].astimezone(UTC),
            "updated_at": r[12].astimezone(UTC),
            "idempotency_key": r[13],
            "request_fingerprint": None,
            "next_attempt_at": None,
            "ready_at": None if (v := r[14]) is None else v.astimezone(UTC),
            "lease_owner": worker_id,
            "lease_expires_at": r[15].astimezone(UTC),
            "fencing_token": r[16],
            "output": None,
            "output_reference": None,
            "error": None,
            "started_at": r[17].astimezone(UTC),
            "finished_at": None,
            "cancel_requested_at": None if (v := r[18]) is None else v.astimezone(UTC),
            "progress": None,
            "checkpoint": r[19],
            "trace_context": r[20],
            "start_by": None if (v := r[21]) is None else v.astimezone(UTC),
            "deadline": None if (v := r[22]) is None else v.astimezone(UTC),
            "concurrency": (
                None
                if r[24] is None
                else Concurrency(r[23] or "", r[24], "none" if r[25] == "none" else "fifo")
            ),
        },
    )


def _check_claimed_decoder() -> None:
    """``claimed_from_row`` fills every field of ``Execution`` and reads ``CLAIMED_COLUMNS``."""
    now = datetime.now(UTC)
    row = tuple(now if name.endswith(("_at", "_start")) else None for name in CLAIMED_COLUMNS)
    if len(row) != 26:
        raise TypeError("claimed_from_row reads 26 columns by position")
    fields = {f.name for f in dataclasses.fields(Execution)}
    if set(claimed_from_row(row, "").__dict__) != fields:
        raise TypeError("claimed_from_row does not fill exactly the fields of Execution")
    returned = {name for name, _ in EXECUTION if column(name) in CLAIMED_COLUMNS}
    if fields - returned - CLAIM_LEAVES_OUT != {"status", "lease_owner", "concurrency"}:
        raise TypeError("a field of Execution is neither claimed, known, nor left out")


_check_claimed_decoder()
