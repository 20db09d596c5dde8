"""A FastAPI app that takes orders and submits each order's invoice job in the order's own
transaction: a failed order leaves no job behind, a job never runs for an order that is not
there.

    TICKWHEEL_DATABASE_URL=sqlite:///tickwheel.db uvicorn web:api --app-dir examples/python
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel
from shop.db import connect, create_tables, insert_order
from shop.jobs import app, send_invoice

import tickwheel


def database_url() -> str:
    return os.environ["TICKWHEEL_DATABASE_URL"]


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    create_tables(database_url())
    with tickwheel.connect(database_url()) as client:
        app.use(client)
        app.register()  # before any order's transaction (SQLite: one writer at a time)
        yield
        app.use(None)


api = FastAPI(lifespan=lifespan)


class Order(BaseModel):
    order_id: str
    total_cents: int


class Placed(BaseModel):
    order_id: str
    invoice_execution_id: str


@api.post("/orders", status_code=201)
def place_order(order: Order) -> Placed:
    conn = connect(database_url())
    try:
        try:
            insert_order(conn, order.order_id, order.total_cents)
        except Exception as exc:  # the driver's unique violation: sqlite3 or psycopg
            conn.rollback()
            raise HTTPException(409, f"order {order.order_id} exists") from exc
        job = send_invoice.submit(
            order_id=order.order_id, total_cents=order.total_cents, connection=conn
        )
        conn.commit()
    finally:
        conn.close()
    return Placed(order_id=order.order_id, invoice_execution_id=str(job.execution_id))
