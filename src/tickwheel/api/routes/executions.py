"""Executions: submit (one or a batch), read, list, cancel, replay."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse

from tickwheel.api.auth import Principal
from tickwheel.api.deps import principal, transport_for
from tickwheel.api.error_schema import refusals
from tickwheel.api.params import Rfc3339
from tickwheel.api.prefer import MINIMAL, prefers_minimal
from tickwheel.client.requests import definition_uri
from tickwheel.domain.errors import InvalidInput
from tickwheel.domain.models import ExecutionFilter, Scope
from tickwheel.domain.states import ExecutionStatus
from tickwheel.resources.executions import (
    AttemptList,
    BatchBody,
    BatchReceipts,
    BatchResult,
    Execution,
    ExecutionOutput,
    ExecutionPage,
    HistoryList,
    SubmitBody,
    receipts_wire,
)

router = APIRouter(prefix="/v1/executions", tags=["executions"])
Who = Annotated[Principal, Depends(principal)]


@router.post(
    "",
    status_code=201,
    response_model=Execution,
    responses={
        200: {"model": Execution, "description": "the same key with the same body: the original"},
        **refusals(400, 403, 409, 413, 422),
    },
)
async def submit(
    body: SubmitBody,
    request: Request,
    response: Response,
    who: Who,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> Execution:
    """201 with a new execution; 200 with the original when the same key comes with the same
    body; 409 when the key was used for a different body."""
    who.require(Scope.SUBMIT)
    # The model itself, not its JSON: the response is validated against it and written once.
    info, created = await transport_for(request, who).submit_model(body.to_request(idempotency_key))
    response.status_code = 201 if created else 200
    return info


@router.post(
    "/batch",
    response_model=BatchResult | BatchReceipts,
    responses={
        200: {
            "description": "one result per item, in order: in full (BatchResult), or with "
            "`Prefer: return=minimal` the status and the execution's id or the error of each "
            "(BatchReceipts, with `Preference-Applied: return=minimal`)",
            "headers": {
                "Preference-Applied": {
                    "description": "`return=minimal` when the answer is BatchReceipts",
                    "schema": {"type": "string"},
                }
            },
        },
        **refusals(400, 403, 413, 422),
    },
)
async def submit_batch(
    body: BatchBody,
    request: Request,
    who: Who,
    prefer: Annotated[
        str | None,
        Header(
            alias="Prefer",
            description="`return=minimal` (RFC 7240): each item's status and execution id "
            "(or error) instead of the whole execution; the same submission and outcomes",
        ),
    ] = None,
) -> Any:
    """Up to 1,000 executions in one transaction, each with its own result."""
    who.require(Scope.SUBMIT)
    requests = [item.to_request(item.idempotencyKey) for item in body.items]
    transport = transport_for(request, who)
    # ``prefer`` is declared for the OpenAPI document; every ``Prefer`` field of the request is
    # read (RFC 7240 lets a request send several, and a parameter would see one).
    if prefers_minimal(request.headers.getlist("prefer")):
        receipts = await transport.submit_many_receipts(requests)
        headers = {"Preference-Applied": MINIMAL}
        return JSONResponse(receipts_wire(receipts), headers=headers)
    return {"items": await transport.submit_many(requests)}


@router.get("", response_model=ExecutionPage, responses=refusals(400, 422))
async def list_executions(
    request: Request,
    who: Who,
    status: Annotated[list[str], Query()] = [],  # noqa: B006 - FastAPI reads, never mutates
    definition: str | None = None,
    idempotency_key: Annotated[str | None, Query(alias="idempotencyKey")] = None,
    key_prefix: Annotated[
        str | None, Query(alias="idempotencyKeyPrefix", min_length=1, max_length=300)
    ] = None,
    execute_from: Annotated[Rfc3339 | None, Query(alias="executeFrom")] = None,
    execute_to: Annotated[Rfc3339 | None, Query(alias="executeTo")] = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> dict[str, Any]:
    """Newest first. ``status`` may repeat or be comma-separated; ``nextCursor`` pages on."""
    flt = ExecutionFilter(
        statuses=_statuses(status),
        definition_uri=definition_uri(definition) if definition else None,
        idempotency_key=idempotency_key,
        idempotency_key_prefix=key_prefix,
        execute_from=execute_from,
        execute_to=execute_to,
    )
    return await transport_for(request, who).list(flt, cursor, limit)


def _statuses(raw: list[str]) -> tuple[ExecutionStatus, ...]:
    names = [part.strip().upper() for value in raw for part in value.split(",") if part.strip()]
    known = {s.value for s in ExecutionStatus}
    bad = [n for n in names if n not in known]
    if bad:
        raise InvalidInput(
            f"unknown status {', '.join(bad)}; use one of {', '.join(sorted(known))}",
        )
    return tuple(ExecutionStatus(n) for n in dict.fromkeys(names))


@router.get("/{execution_id}", response_model=Execution, responses=refusals(404, 422))
async def get_execution(execution_id: uuid.UUID, request: Request, who: Who) -> dict[str, Any]:
    return await transport_for(request, who).get(execution_id)


@router.get("/{execution_id}/attempts", response_model=AttemptList, responses=refusals(404, 422))
async def get_attempts(execution_id: uuid.UUID, request: Request, who: Who) -> dict[str, Any]:
    return {"items": await transport_for(request, who).attempts(execution_id)}


@router.get("/{execution_id}/output", response_model=ExecutionOutput, responses=refusals(404, 422))
async def get_output(execution_id: uuid.UUID, request: Request, who: Who) -> dict[str, Any]:
    """The whole output, also when it was too large to keep in the execution (outputReference)."""
    return await transport_for(request, who).output(execution_id)


@router.get("/{execution_id}/history", response_model=HistoryList, responses=refusals(404, 422))
async def get_history(execution_id: uuid.UUID, request: Request, who: Who) -> dict[str, Any]:
    """Cancels (and cancel requests) and replays, oldest first (attempts have their own
    route)."""
    return {"items": await transport_for(request, who).history(execution_id)}


@router.delete("/{execution_id}", response_model=Execution, responses=refusals(403, 404, 409, 422))
async def cancel(execution_id: uuid.UUID, request: Request, who: Who) -> dict[str, Any]:
    """Cancels a SCHEDULED, READY or RETRY_WAIT execution at once (it answers CANCELLED). A
    RUNNING one is asked to stop: the answer is 200 with the execution still RUNNING and
    ``cancelRequestedAt`` set; its worker hears it at its next heartbeat, stops the handler and
    the execution ends CANCELLED. 409 says why a finished one cannot be cancelled."""
    who.require(Scope.SUBMIT)
    return await transport_for(request, who).cancel(execution_id)


@router.post(
    "/{execution_id}/replay", response_model=Execution, responses=refusals(403, 404, 409, 422)
)
async def replay(execution_id: uuid.UUID, request: Request, who: Who) -> dict[str, Any]:
    """Brings a FAILED execution (a dead letter) back to READY with a fresh attempt budget."""
    who.require(Scope.SUBMIT)
    return await transport_for(request, who).replay(execution_id)
