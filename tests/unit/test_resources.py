"""The resource models: the JSON shape the API has always written, read back by the SDK."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from pydantic import TypeAdapter, ValidationError

from tests.factories import T0
from tickwheel.client.transports.answers import ServerError, checked
from tickwheel.domain.concurrency import Concurrency
from tickwheel.domain.models import Execution as ExecutionRecord
from tickwheel.domain.states import ExecutionStatus
from tickwheel.resources.base import Instant, iso
from tickwheel.resources.cron import CronJob
from tickwheel.resources.executions import (
    BatchItemResult,
    Execution,
    FieldSets,
    execution_fields,
    execution_wire,
)

RECORD = ExecutionRecord(
    execution_id=uuid.UUID("019ca945-38e0-7fc1-ac6b-dd6af1fcd7ec"),
    tenant="acme",
    definition_uri="registry://jobs/greet",
    definition_version=2,
    inputs={"name": "Ada"},
    execute_at=T0,
    status=ExecutionStatus.READY,
    priority=3,
    attempt_count=0,
    max_attempts=4,
    shard_id=7,
    bucket_start=T0,
    created_at=T0,
    updated_at=T0 + timedelta(microseconds=1500),
)


@pytest.mark.parametrize(
    "at",
    [
        T0,
        T0 + timedelta(microseconds=120),
        datetime(2026, 3, 1, 12, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(2026, 7, 1, tzinfo=ZoneInfo("Europe/Berlin")),
        datetime(2026, 1, 1, tzinfo=ZoneInfo("Europe/London")),
        datetime(1, 1, 1, tzinfo=UTC),
    ],
)
def test_an_instant_is_written_as_the_api_always_wrote_it(at: datetime) -> None:
    assert TypeAdapter(Instant).dump_python(at, mode="json") == iso(at)


def test_an_execution_on_the_wire_is_camel_case_in_its_order_and_reads_back() -> None:
    wire = Execution.of(RECORD).to_wire()
    assert list(wire)[:4] == ["executionId", "status", "definitionUri", "definitionVersion"]
    assert wire["updatedAt"] == "2026-03-01T12:00:00.001500Z"
    assert (wire["priority"], wire["nextAttemptAt"]) == (3, None)
    info = Execution.from_wire(wire)
    assert (info.execution_id, info.status, info.priority) == (RECORD.execution_id, "READY", 3)
    assert info.execute_at == T0 and not info.finished
    assert info.to_wire() == wire


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"status": ExecutionStatus.RUNNING, "started_at": T0, "idempotency_key": "k-1"},
        {
            "status": ExecutionStatus.FAILED,
            "output": [1, "two", {"3": None}],
            "error": {"kind": "permanent", "message": "no"},
            "next_attempt_at": T0 + timedelta(seconds=5),
            "finished_at": datetime(2026, 3, 1, 12, tzinfo=timezone(timedelta(hours=5))),
        },
        {
            "cancel_requested_at": T0 + timedelta(microseconds=7),
            "progress": {"fraction": 0.42, "message": "copied 4,200 rows", "at": T0.isoformat()},
            "checkpoint": {"offset": 4200, "files": ["a", "b"]},
        },
        {"output_reference": "outputs/x", "output": None, "inputs": {}},
        {"concurrency": Concurrency("customer-7", 2, "none")},
        {"concurrency": Concurrency("", 1, "fifo"), "checkpoint": {"n": 1}},
    ],
)
def test_the_direct_wire_form_is_the_models(changes: dict[str, object]) -> None:
    """``execution_wire`` skips the model for speed; it must write exactly what the model does:
    the same keys, in the same order, with the same values."""
    record = dataclasses.replace(RECORD, **changes)  # type: ignore[arg-type]
    direct, via_model = execution_wire(record), Execution.of(record).to_wire()
    assert direct == via_model
    assert list(direct) == list(via_model)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"status": ExecutionStatus.RUNNING, "started_at": T0, "idempotency_key": "k-1"},
        {
            "finished_at": datetime(2026, 3, 1, 12, tzinfo=timezone(timedelta(hours=5))),
            "output": [1, "two", {"3": None}],
        },
        {
            "cancel_requested_at": T0 + timedelta(microseconds=7),
            "progress": {"fraction": 0.42, "message": "copied 4,200 rows", "at": T0.isoformat()},
            "checkpoint": {"offset": 4200, "files": ["a", "b"]},
        },
    ],
)
def test_the_model_made_in_process_is_the_one_read_from_the_wire(
    changes: dict[str, object],
) -> None:
    """The in-process transport hands the SDK ``Execution.of(record)`` without a JSON round; the
    SDK over HTTP reads ``from_wire`` of the same record's JSON: equal models, equal JSON."""
    record = dataclasses.replace(RECORD, **changes)  # type: ignore[arg-type]
    direct, via_wire = Execution.of(record), Execution.from_wire(execution_wire(record))
    assert direct == via_wire
    assert direct.to_wire() == via_wire.to_wire()
    assert direct.model_fields_set == via_wire.model_fields_set


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"status": ExecutionStatus.RUNNING, "started_at": T0, "idempotency_key": "k-1"},
        {
            "status": ExecutionStatus.FAILED,
            "output": [1, "two", {"3": None}],
            "error": {"kind": "permanent", "message": "no", "details": {"a": [1]}},
            "next_attempt_at": T0 + timedelta(seconds=5),
            "finished_at": datetime(2026, 3, 1, 12, tzinfo=timezone(timedelta(hours=5))),
        },
        {
            "cancel_requested_at": T0 + timedelta(microseconds=7),
            "progress": {"fraction": 0.42, "message": "copied 4,200 rows", "at": T0.isoformat()},
            "checkpoint": {"offset": 4200, "files": ["a", "b"]},
        },
        {"output_reference": "outputs/x", "output": None, "inputs": {}},
        {"start_by": T0.astimezone(ZoneInfo("Europe/Berlin")), "deadline": T0},
        {"concurrency": Concurrency("customer-7", 2, "none"), "checkpoint": 0},
        {"execute_at": datetime(2026, 7, 1, tzinfo=ZoneInfo("Europe/Berlin")), "output": "x"},
    ],
)
def test_the_built_model_is_the_validated_one(changes: dict[str, object]) -> None:
    """``Execution.of`` builds the model without the validator: equal to the validator's, the
    same values of the same types in the same order, the same fields given, the same JSON."""
    record = dataclasses.replace(RECORD, **changes)  # type: ignore[arg-type]
    made, validated = Execution.of(record), Execution.model_validate(execution_fields(record))
    assert made == validated
    assert list(made.__dict__) == list(validated.__dict__)
    for name, value in validated.__dict__.items():
        assert type(made.__dict__[name]) is type(value), name
        assert made.__dict__[name] == value, name
    assert made.model_fields_set == validated.model_fields_set
    assert made.to_wire() == validated.to_wire()
    assert list(made.to_wire()) == list(validated.to_wire())
    assert made.model_dump() == validated.model_dump()
    assert made.inputs is not record.inputs  # its own copy, as the validator makes
    if record.error is not None:
        assert made.error is not record.error


@pytest.mark.parametrize(
    "changes", [{"error": ["not", "an", "object"]}, {"inputs": [["a", 1]]}, {"error": "x"}]
)
def test_a_record_of_another_shape_is_refused_by_the_validator(changes: dict[str, object]) -> None:
    """Records hold an object of inputs and an error object or None; anything else is not
    built but validated, and refused as before (never read as a dictionary)."""
    record = dataclasses.replace(RECORD, **changes)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Execution.of(record)


def test_built_models_sharing_a_fields_set_stay_apart() -> None:
    """The answers of one call share their set of fields given: a frozen model cannot change
    it, and ``model_copy`` copies it first."""
    sets: FieldSets = {}
    first, second = Execution.of(RECORD, sets), Execution.of(RECORD, sets)
    assert first.model_fields_set is second.model_fields_set
    with pytest.raises(ValidationError):
        first.priority = 5  # type: ignore[misc]
    copied = first.model_copy(update={"checkpoint": {"n": 1}})
    assert "checkpoint" in copied.model_fields_set
    assert "checkpoint" not in first.model_fields_set | second.model_fields_set
    assert (first.checkpoint, second.checkpoint) == (None, None)
    assert Execution.of(RECORD).model_fields_set is not first.model_fields_set


def test_keys_the_api_leaves_out_stay_out() -> None:
    refused = BatchItemResult.from_wire({"status": 409, "error": {"code": "conflict"}})
    assert refused.to_wire() == {"status": 409, "error": {"code": "conflict"}}
    assert not refused.ok and refused.execution is None


def test_a_cron_job_keeps_the_sdk_names_of_its_target() -> None:
    job = {
        "cronJobId": str(uuid.uuid4()),
        "name": "n",
        "definitionUri": None,
        "definitionVersion": None,
        "workflow": {"name": "report", "version": 2},
        "inputs": {},
        "expression": "* * * * *",
        "timezone": "UTC",
        "dstPolicy": {"nonexistent": "shift_forward", "ambiguous": "first"},
        "misfirePolicy": "run_once",
        "maxCatchUp": 10,
        "overlapPolicy": "allow",
        "jitter": 0,
        "startAt": None,
        "endAt": None,
        "target": "workflow",
        "definitionVersionPolicy": None,
        "workflowVersionPolicy": "pinned",
        "status": "ACTIVE",
        "nextRunAt": "2026-03-01T12:01:00Z",
        "lastOccurrence": None,
        "lastExecutionId": None,
        "lastWorkflowRunId": None,
        "version": 1,
        "createdAt": "2026-03-01T12:00:00Z",
        "updatedAt": "2026-03-01T12:00:00Z",
        "pausedAt": None,
        "label": None,
    }
    info = CronJob.from_wire(job)
    assert (info.target, info.workflow, info.workflow_version) == ("workflow", "report", 2)
    assert info.next_fire_times == [] and "nextFireTimes" not in info.wire
    assert info.wire == job


def test_the_http_transport_refuses_an_answer_of_another_shape() -> None:
    wire = Execution.of(RECORD).to_wire()
    assert checked(Execution, wire, "GET /v1/executions/x") is wire
    with pytest.raises(ServerError, match=r"does not match Execution: status: Input should be"):
        checked(Execution, {**wire, "status": "NAPPING"}, "GET /v1/executions/x")
    with pytest.raises(ServerError, match="executionId: Field required"):
        checked(Execution, {k: v for k, v in wire.items() if k != "executionId"}, "GET x")
