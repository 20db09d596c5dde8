"""The field lists that are still written out more than once are held to each other, so that a
field added to one and forgotten in another fails here, with its name, instead of vanishing on
the way (docs/development.md, "Adding a field to an Execution").

* A submission: ``SubmitRequest`` (domain), the body the API reads and the SDK sends
  (``SubmitBody``), and the SDK's keywords (``SubmitOptions``).
* A stored execution: the record (``domain.models.Execution``), the row the store inserts
  (``NewExecution``) and the API's answer (``resources.executions.Execution``; its direct JSON,
  ``execution_wire``, is held to the model in ``test_resources.py``)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from pydantic.alias_generators import to_snake

from tickwheel.client.requests import submit_request
from tickwheel.domain.models import Execution as ExecutionRecord
from tickwheel.domain.submission import NewExecution, SubmitOptions, SubmitRequest
from tickwheel.resources.executions import Execution, SubmitBody

# What the SDK takes positionally in ``submit(definition, inputs, execute_at, idempotency_key)``
# (the key also travels as a header, not in the body): every other field is a keyword option.
POSITIONAL = {"definition_uri", "inputs", "execute_at", "idempotency_key"}
# Fields of the stored record that are the store's and the engine's, never in the API's answer.
INTERNAL = {
    "tenant", "shard_id", "bucket_start", "request_fingerprint", "ready_at", "lease_owner",
    "lease_expires_at", "fencing_token", "trace_context",
}  # fmt: skip


# Fields of a request that never travel: a cron tick's per-occurrence trace context is handed
# to the in-process path only (the API takes the caller's from its traceparent header).
IN_PROCESS = {"trace_context"}


def names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_the_submit_body_has_exactly_the_requests_fields() -> None:
    body = {to_snake(name) for name in SubmitBody.model_fields}
    assert body == names(SubmitRequest) - {"idempotency_key"} - IN_PROCESS


def test_the_sdk_takes_every_optional_field_of_a_request_as_a_keyword() -> None:
    options = set(SubmitOptions.__annotations__) - {"version"} | {"definition_version"}
    assert options == names(SubmitRequest) - POSITIONAL - IN_PROCESS


def test_a_request_with_every_field_set_survives_the_sdk_and_the_body() -> None:
    """Every field away from its default: what the SDK builds, sends and the API reads back is
    the same request (a field missed anywhere on the way comes back at its default)."""
    request = submit_request(
        "greet",
        {"name": "Ada"},
        datetime(2026, 3, 1, 12, tzinfo=UTC),
        "key-1",
        version=3,
        priority=7,
        start_by=datetime(2026, 3, 1, 13, tzinfo=UTC),
        deadline=datetime(2026, 3, 1, 14, tzinfo=UTC),
        concurrency={"key": "${{ inputs.name }}", "limit": 2, "order": "none"},
    )
    for f in dataclasses.fields(SubmitRequest):
        if f.name in IN_PROCESS:
            continue
        default = f.default_factory() if callable(f.default_factory) else f.default
        assert getattr(request, f.name) != default, f"set {f.name} in this test"
    read = SubmitBody.model_validate(SubmitBody.body(request)).to_request("key-1")
    assert read == request


def test_the_answer_shows_every_field_of_the_record_but_the_internal_ones() -> None:
    assert set(Execution.model_fields) == names(ExecutionRecord) - INTERNAL


def test_every_field_the_store_inserts_is_on_the_record() -> None:
    assert names(NewExecution) <= names(ExecutionRecord)
