"""Executions and what hangs off them: attempts, history events, output, batch results; and
the submit request, which the API reads and the SDK writes."""

from __future__ import annotations

import uuid
from datetime import datetime
from operator import attrgetter, is_, itemgetter
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, StrictInt
from pydantic.alias_generators import to_snake

from tickwheel.domain.concurrency import Concurrency, spec_of
from tickwheel.domain.models import Attempt as AttemptRecord
from tickwheel.domain.models import Execution as ExecutionRecord
from tickwheel.domain.models import ExecutionEvent, ExecutionEventKind
from tickwheel.domain.states import TERMINAL, AttemptStatus, ExecutionStatus
from tickwheel.domain.submission import SubmitRequest
from tickwheel.resources.base import (
    Instant,
    ItemList,
    Page,
    Resource,
    buildable,
    built,
    iso,
    omitted_when_none,
)
from tickwheel.resources.fields import Rfc3339

MAX_BATCH = 1000


class SubmitBody(BaseModel):
    """The body of a submission. Strict types: ``"1"`` is not a version and ``true`` is not a
    priority."""

    model_config = ConfigDict(extra="forbid")

    definitionUri: str = Field(min_length=1, max_length=300)
    definitionVersion: StrictInt | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    executeAt: Rfc3339 | None = None
    priority: StrictInt = 0
    startBy: Rfc3339 | None = None
    deadline: Rfc3339 | None = None

    concurrency: dict[str, Any] | None = Field(
        None,
        description="overrides the definition's: {key: '${{ inputs.x }}', limit, order:"
        " fifo|none} (docs/flow-control.md)",
    )

    def to_request(self, idempotency_key: str | None) -> SubmitRequest:
        """Each field to the ``SubmitRequest`` field of its snake_case name."""
        fields = {snake: getattr(self, name) for name, snake in _SUBMIT_FIELDS}
        fields["concurrency"] = spec_of(self.concurrency)
        return SubmitRequest(**fields, idempotency_key=idempotency_key)

    @classmethod
    def body(cls, request: SubmitRequest) -> dict[str, Any]:
        """What the SDK sends for ``request``: what it leaves at its default is left out."""
        fields = {name: getattr(request, snake) for name, snake in _SUBMIT_FIELDS}
        group = request.concurrency
        fields["concurrency"] = group.to_document() if group is not None else None
        return cls.model_construct(**fields).model_dump(mode="json", exclude_defaults=True)


_SUBMIT_FIELDS = tuple((name, to_snake(name)) for name in SubmitBody.model_fields)
"""The body's fields (camelCase, as the API reads them) with the ``SubmitRequest`` field each
one is (``tests/unit/test_field_lists.py`` holds the two classes to the same fields)."""


class BatchItem(SubmitBody):
    idempotencyKey: str | None = None


class BatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[BatchItem] = Field(min_length=1, max_length=MAX_BATCH)


class Progress(Resource):
    """A running handler's last progress report (``context.progress``)."""

    fraction: float = Field(ge=0, le=1)
    message: str
    at: Instant

    @classmethod
    def of(cls, value: dict[str, Any] | None) -> Progress | None:
        if value is None:
            return None
        return cls.model_construct(
            fraction=value["fraction"],
            message=value["message"],
            at=datetime.fromisoformat(value["at"]),
        )


class ConcurrencyGroup(Resource):
    """An execution's concurrency limit: its key as evaluated at submit ("" when the limit is
    for the whole definition), the limit and the order (docs/flow-control.md)."""

    key: str
    limit: int
    order: Literal["fifo", "none"]

    @classmethod
    def of(cls, value: Concurrency | None) -> ConcurrencyGroup | None:
        if value is None:
            return None
        return cls.model_construct(key=value.key, limit=value.limit, order=value.order)


class Execution(Resource):
    """One run of a Job Definition (``executionId``), from submission to its end."""

    execution_id: uuid.UUID
    status: ExecutionStatus
    definition_uri: str
    definition_version: int
    inputs: dict[str, Any]
    execute_at: Instant
    priority: int
    idempotency_key: str | None
    attempt_count: int
    max_attempts: int
    next_attempt_at: Instant | None
    output: Any = Field(description="the job's output; null when kept by outputReference")
    output_reference: str | None
    error: dict[str, Any] | None
    created_at: Instant
    updated_at: Instant
    started_at: Instant | None
    finished_at: Instant | None
    cancel_requested_at: Instant | None = omitted_when_none(
        "when a cancel was asked while it ran: its worker stops it and it ends CANCELLED"
    )
    progress: Progress | None = omitted_when_none("the handler's last progress report")
    checkpoint: Any = omitted_when_none(
        "the handler's last checkpoint (JSON), handed to its next attempt"
    )
    start_by: Instant | None = omitted_when_none("not started by then: it ends EXPIRED")
    deadline: Instant | None = omitted_when_none("no attempt starts after it")
    concurrency: ConcurrencyGroup | None = omitted_when_none(
        "its concurrency limit, when it has one: at most `limit` of its key run at once"
    )

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    @classmethod
    def of(cls, e: ExecutionRecord, fields_sets: FieldSets | None = None) -> Execution:
        """The record as the resource: ``model_validate(execution_fields(e))``, built without
        the validator (``built``): a record's values are already of the fields' types, and
        every item of a batch's answer paid the validator's copy of its values, a set of the
        fields given and a dictionary more (``tests/unit/test_resources.py`` holds the two
        equal, field by field). ``fields_sets``: the sets of fields given made so far, by
        which optional fields are left out, shared by the answers of one call."""
        if type(e.inputs) is not dict or (e.error is not None and type(e.error) is not dict):
            # Not what the store reads back (an object, and an error object or None): the
            # validator says what is wrong with it, as it always did.
            return cls.model_validate(execution_fields(e))
        values = _model_values(e)
        if e.progress is not None:
            values["progress"] = Progress.of(e.progress)
        if e.concurrency is not None:
            values["concurrency"] = ConcurrencyGroup.of(e.concurrency)
        shape = tuple(map(is_, _omitted_values(values), _NONES))
        sets = _FIELDS_SETS if fields_sets is None else fields_sets
        fields_set = sets.get(shape)
        if fields_set is None:
            left_out = {n for n, none in zip(_OMITTED_ORDER, shape, strict=True) if none}
            fields_set = sets[shape] = {n for n in _MODEL_NAMES if n not in left_out}
        if fields_sets is None:  # an answer alone has a set of its own, as the validator's
            fields_set = set(fields_set)
        return built(cls, values, fields_set)


def execution_fields(e: ExecutionRecord) -> dict[str, Any]:
    """The record's values under the resource's field names, for ``Execution.of``: each the
    record's field of the same name (``_RECORD_FIELDS``), so a new field is not copied by hand
    here. One the JSON leaves out when it has no value is left out rather than None, so the
    same fields are set either way."""
    fields = dict(vars(e))  # the model reads its own fields and ignores the record's others
    for name in _OMITTED_WHEN_NONE:
        if fields.get(name, 0) is None:
            del fields[name]
    if e.progress is not None:
        fields["progress"] = Progress.of(e.progress)
    if e.concurrency is not None:
        fields["concurrency"] = ConcurrencyGroup.of(e.concurrency)
    return fields


FieldSets = dict[tuple[bool, ...], set[str]]
"""An answer's set of the fields given, by which of the fields left out when None are None."""
buildable(Execution)
_MODEL_NAMES = tuple(Execution.model_fields)


def _model_values(e: ExecutionRecord) -> dict[str, Any]:
    """The record's value of each field of the model, in the model's order (a new field of the
    model is a line here: ``tests/unit/test_resources.py`` compares the keys with the
    validator's); ``progress`` and ``concurrency`` still the record's. A dictionary field is a
    copy, as the validator leaves it: the model and the record each have their own. Written out
    rather than a loop over the names: half the time, for every item of a batch."""
    error = e.error
    return {
        "execution_id": e.execution_id,
        "status": e.status,
        "definition_uri": e.definition_uri,
        "definition_version": e.definition_version,
        "inputs": dict(e.inputs),
        "execute_at": e.execute_at,
        "priority": e.priority,
        "idempotency_key": e.idempotency_key,
        "attempt_count": e.attempt_count,
        "max_attempts": e.max_attempts,
        "next_attempt_at": e.next_attempt_at,
        "output": e.output,
        "output_reference": e.output_reference,
        "error": None if error is None else dict(error),
        "created_at": e.created_at,
        "updated_at": e.updated_at,
        "started_at": e.started_at,
        "finished_at": e.finished_at,
        "cancel_requested_at": e.cancel_requested_at,
        "progress": e.progress,
        "checkpoint": e.checkpoint,
        "start_by": e.start_by,
        "deadline": e.deadline,
        "concurrency": e.concurrency,
    }


_RECORD_FIELDS = tuple(n for n in Execution.model_fields if n not in ("progress", "concurrency"))
"""The fields an answer copies from the record as they are (all but two made from theirs): a
field of the model is read from the record's field of the same name."""
_record_values = attrgetter(*_RECORD_FIELDS)
_OMITTED_WHEN_NONE = frozenset(
    name for name, info in Execution.model_fields.items() if info.exclude_if is not None
)
"""The fields the JSON leaves out when they have no value (``omitted_when_none``)."""
_OMITTED_ORDER = tuple(n for n in _MODEL_NAMES if n in _OMITTED_WHEN_NONE)
_omitted_values = itemgetter(*_OMITTED_ORDER)
_NONES = (None,) * len(_OMITTED_ORDER)
_FIELDS_SETS: FieldSets = {}
"""The sets of fields given made so far for answers made alone (a single submission's), copied
for each: one per shape, of which there are at most two to the number of omitted fields."""


def execution_wire(e: ExecutionRecord) -> dict[str, Any]:
    """``Execution.of(e).to_wire()`` without the model: the same keys in the same order, the same
    values (``tests/unit/test_resources.py`` holds the two equal). The submit and list paths
    turn every execution into JSON, and building then dumping a 21-field model cost about 40 µs
    of an in-process batch submit's 140 µs per item."""
    wire: dict[str, Any] = {
        "executionId": str(e.execution_id),
        "status": str(e.status),
        "definitionUri": e.definition_uri,
        "definitionVersion": e.definition_version,
        "inputs": e.inputs,
        "executeAt": iso(e.execute_at),
        "priority": e.priority,
        "idempotencyKey": e.idempotency_key,
        "attemptCount": e.attempt_count,
        "maxAttempts": e.max_attempts,
        "nextAttemptAt": iso(e.next_attempt_at),
        "output": e.output,
        "outputReference": e.output_reference,
        "error": e.error,
        "createdAt": iso(e.created_at),
        "updatedAt": iso(e.updated_at),
        "startedAt": iso(e.started_at),
        "finishedAt": iso(e.finished_at),
    }
    if e.cancel_requested_at is not None:
        wire["cancelRequestedAt"] = iso(e.cancel_requested_at)
    if e.progress is not None:
        progress = Progress.of(e.progress)
        assert progress is not None
        wire["progress"] = progress.to_wire()
    if e.checkpoint is not None:
        wire["checkpoint"] = e.checkpoint
    if e.start_by is not None:
        wire["startBy"] = iso(e.start_by)
    if e.deadline is not None:
        wire["deadline"] = iso(e.deadline)
    if e.concurrency is not None:
        c = e.concurrency
        wire["concurrency"] = {"key": c.key, "limit": c.limit, "order": c.order}
    return wire


class Attempt(Resource):
    """One try of an execution by a worker."""

    attempt_number: int
    status: AttemptStatus
    worker_id: str
    fencing_token: int
    started_at: Instant
    finished_at: Instant | None
    error: dict[str, Any] | None

    @classmethod
    def of(cls, a: AttemptRecord) -> Attempt:
        return cls.model_construct(
            attempt_number=a.attempt_number,
            status=a.status,
            worker_id=a.worker_id,
            fencing_token=a.fencing_token,
            started_at=a.started_at,
            finished_at=a.finished_at,
            error=a.error,
        )


class HistoryEvent(Resource):
    """A cancel (asked while running, or done), or a replay of an execution (attempts have
    their own list)."""

    kind: ExecutionEventKind
    at: Instant
    detail: dict[str, Any]

    @classmethod
    def of(cls, ev: ExecutionEvent) -> HistoryEvent:
        return cls.model_construct(kind=ev.kind, at=ev.at, detail=ev.detail)


class ExecutionOutput(Resource):
    """The whole output, also when too large to keep inline (``outputReference`` says where)."""

    output: Any
    output_reference: str | None


class BatchItemResult(Resource):
    """One item of a batch submission: ``status`` is 201 (created), 200 (same key, same
    request), 409 (key used for another request) or 422 (invalid); ``execution`` for the first
    two, ``error`` for the others."""

    status: int
    execution: Execution | None = omitted_when_none()
    error: dict[str, Any] | None = omitted_when_none(
        "as in the error body: {code, message, details}"
    )

    @property
    def ok(self) -> bool:
        return self.status in (200, 201)

    def receipt(self) -> SubmitReceipt:
        """This result as ``answer="ids"`` gives it."""
        execution = self.execution
        execution_id = None if execution is None else execution.execution_id
        return SubmitReceipt(self.status, execution_id, self.error)

    @classmethod
    def of(
        cls,
        status: int,
        execution: Execution | None,
        error: dict[str, Any] | None,
        fields_sets: dict[bool, set[str]] | None = None,
    ) -> BatchItemResult:
        """``model_validate`` of ``{"status": status, "execution": execution}`` or, with an
        ``error`` (its own dictionary), of ``{"status": status, "error": error}``, built
        (``Execution.of``); ``fields_sets`` as there, by whether it is an error."""
        failed = error is not None
        sets = {} if fields_sets is None else fields_sets
        fields_set = sets.get(failed)
        if fields_set is None:
            fields_set = sets[failed] = {"status", "error" if failed else "execution"}
        values = {"status": status, "execution": execution, "error": error}
        return built(cls, values, fields_set)


buildable(BatchItemResult)


class SubmitReceipt(NamedTuple):
    """One item of a batch submitted for its receipts (``submit_many(..., answer="ids")``,
    ``Prefer: return=minimal``): what PgQueuer's batch enqueue gives, a list of ids, and what
    the full answer says besides the execution. ``status`` is the full answer's (201 created,
    200 the same key with the same request: ``execution_id`` is the original's, 409 the key was
    used for another request, 422 invalid), ``execution_id`` is there for 201 and 200,
    ``error`` (``{code, message, details}``, as in the full answer) for 409 and 422.

    A named tuple, not a model: a batch's answer is most of what it leaves alive, and the
    full answer's two models per item cost its caller (and its garbage collector) more than
    preparing the item did. ``get(execution_id)`` reads the whole execution."""

    status: int
    execution_id: uuid.UUID | None
    error: dict[str, Any] | None

    @property
    def ok(self) -> bool:
        return self.status in (200, 201)

    @property
    def created(self) -> bool:
        """Stored by this call (False: the original of its key, or refused)."""
        return self.status == 201


class BatchReceipt(Resource):
    """One item of ``POST /v1/executions/batch`` with ``Prefer: return=minimal``: the status
    of the full answer's item, its execution's id (201 and 200) or its error (409 and 422)."""

    status: int
    execution_id: uuid.UUID | None = omitted_when_none()
    error: dict[str, Any] | None = omitted_when_none(
        "as in the error body: {code, message, details}"
    )

    def receipt(self) -> SubmitReceipt:
        return SubmitReceipt(self.status, self.execution_id, self.error)


class ExecutionPage(Page[Execution]):
    """Executions, newest first."""


class AttemptList(ItemList[Attempt]):
    """Attempts, first to last."""


class HistoryList(ItemList[HistoryEvent]):
    """Cancels and replays, oldest first."""


class BatchResult(ItemList[BatchItemResult]):
    """One result per submitted item, in the order given."""


class BatchReceipts(ItemList[BatchReceipt]):
    """One receipt per submitted item, in the order given (``Prefer: return=minimal``)."""


def receipts_wire(receipts: list[SubmitReceipt]) -> dict[str, Any]:
    """``BatchReceipts``'s JSON for ``receipts``, written directly: the same keys and values
    as the model's (``tests/api/test_submit_receipts.py`` holds the two equal)."""
    items: list[dict[str, Any]] = []
    for status, execution_id, error in receipts:
        if execution_id is not None:
            items.append({"status": status, "executionId": str(execution_id)})
        else:
            items.append({"status": status, "error": error})
    return {"items": items}
