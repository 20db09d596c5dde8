"""The outbox rows the execution store writes in its own transactions: a workflow's task run
that ends, a dead letter a webhook subscription may want. Apart from the workflow and webhook
stores, whose domain (the definition parsers, cron) a worker never needs at start: the claims'
finish and the cancel import only this."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from tickwheel.store.postgres.notify import WAKE_WEBHOOK_SENDERS
from tickwheel.store.postgres.pool import Conn
from tickwheel.store.postgres.rows import opt_aware
from tickwheel.store.sqlfile import load_queries
from tickwheel.store.workflow_keys import workflow_run_of_key

Q = load_queries("tickwheel.store.postgres.sql")
_TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


async def workflow_event_record(
    conn: Conn,
    idempotency_key: str | None,
    execution_id: uuid.UUID,
    status: str,
    now: datetime | None,
) -> bool:
    """Called by the main store inside the transaction that moves an execution to a terminal
    ``status``: adds the outbox row when the execution is a workflow's task run (the caller
    then NOTIFYs Topic.WORKFLOW in the same transaction). Executions not from workflows pay a
    string comparison and nothing else: no statement, and no trigger on the hot table."""
    run_id = workflow_run_of_key(idempotency_key)
    if run_id is None or status not in _TERMINAL:
        return False
    params = {
        "execution_id": execution_id,
        "workflow_run_id": run_id,
        "status": status,
        "now": now,
    }
    await conn.execute(Q["workflow_event_insert"], params)
    return True


async def webhook_outbox_execution_failed(
    conn: Conn, execution_ids: Sequence[uuid.UUID], now: datetime | None
) -> None:
    """The dead letters' outbox rows, in the caller's transaction (only for those of
    ``execution_ids`` that are FAILED; none for a tenant without a subscription)."""
    if execution_ids:
        params = {"execution_ids": list(execution_ids), "now": opt_aware(now)}
        cursor = await conn.execute(Q["webhook_outbox_execution_failed"], params)
        if cursor.rowcount:
            await conn.execute(WAKE_WEBHOOK_SENDERS)
