"""``submit(..., connection=conn)``: the execution is written inside the caller's open transaction
on their own connection (psycopg 3 sync and async on PostgreSQL, sqlite3 and aiosqlite on
SQLite). It exists exactly when that transaction commits, a worker then runs it, idempotency keys
dedupe inside and across transactions, and the caller's connection stays in its transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import aiosqlite
import psycopg
import pytest
from psycopg import pq

import tickwheel
from tests.client.conftest import GREET_JSON, Database
from tickwheel.domain.errors import Conflict, NotFound
from tickwheel.engine.worker import Worker
from tickwheel.store.factory import open_store


def _connect(database: Database) -> Any:
    """The application's own blocking connection, not in autocommit: its first statement opens
    a transaction."""
    if database.kind == "sqlite":
        return sqlite3.connect(database.path or "")
    return psycopg.connect(database.url)


def _in_transaction(conn: Any) -> bool:
    if isinstance(conn, sqlite3.Connection | aiosqlite.Connection):
        return conn.in_transaction
    return bool(conn.info.transaction_status == pq.TransactionStatus.INTRANS)


@pytest.fixture
def client(database: Database) -> Iterator[tickwheel.Client]:
    with tickwheel.connect(database.url, tenant="acme") as c:
        c.apply_definition(GREET_JSON, "json")
        yield c


def test_a_rollback_leaves_nothing(database: Database, client: tickwheel.Client) -> None:
    conn = _connect(database)
    try:
        info = client.submit("greet", {"name": "Ada"}, idempotency_key="k", connection=conn)
        assert _in_transaction(conn)  # left as it was: open, uncommitted
        assert client.list().items == []  # not visible outside the transaction
        conn.rollback()
    finally:
        conn.close()
    with pytest.raises(NotFound):
        client.get(info.execution_id)
    assert client.list(idempotency_key="k").items == []


async def test_a_commit_makes_it_run(database: Database, client: tickwheel.Client) -> None:
    conn = _connect(database)
    try:
        info = client.submit("greet", {"name": "Ada", "times": 2}, connection=conn)
        conn.commit()
    finally:
        conn.close()
    assert client.get(info.execution_id).status == "READY"
    store = await open_store(database.url)
    try:
        worker = Worker(store, worker_id="w1")
        assert await worker.run_once() == 1
        await worker.drain()
    finally:
        await store.close()
    assert client.get(info.execution_id).status == "SUCCEEDED"
    assert client.output(info.execution_id) == {"greeting": "Hello, Ada! Hello, Ada!"}


def test_idempotency_keys_dedupe_inside_and_across_transactions(
    database: Database, client: tickwheel.Client
) -> None:
    conn = _connect(database)
    try:
        first = client.submit("greet", {"name": "Ada"}, idempotency_key="k", connection=conn)
        same = client.submit("greet", {"name": "Ada"}, idempotency_key="k", connection=conn)
        assert same.execution_id == first.execution_id
        with pytest.raises(Conflict):
            client.submit("greet", {"name": "Bob"}, idempotency_key="k", connection=conn)
        conn.commit()
        later = client.submit("greet", {"name": "Ada"}, idempotency_key="k", connection=conn)
        assert later.execution_id == first.execution_id
        conn.commit()
    finally:
        conn.close()
    # And against a submission outside any transaction of the caller's.
    assert client.submit("greet", {"name": "Ada"}, idempotency_key="k").execution_id == (
        first.execution_id
    )
    assert len(client.list().items) == 1


async def test_the_async_client_submits_on_an_asyncio_connection(database: Database) -> None:
    async with await tickwheel.connect_async(database.url, tenant="acme") as client:
        await client.apply_definition(GREET_JSON, "json")
        conn: Any
        if database.kind == "sqlite":
            conn = await aiosqlite.connect(database.path or "")
        else:
            conn = await psycopg.AsyncConnection.connect(database.url)
        try:
            kept = await client.submit("greet", {"name": "Ada"}, connection=conn)
            assert _in_transaction(conn)
            await conn.commit()
            dropped = await client.submit_after(60, "greet", {"name": "Bob"}, connection=conn)
            await conn.rollback()
        finally:
            await conn.close()
        assert (await client.get(kept.execution_id)).status == "READY"
        with pytest.raises(NotFound):
            await client.get(dropped.execution_id)


def test_the_wrong_kind_of_connection_is_refused_and_nothing_is_stored(
    database: Database, client: tickwheel.Client, tmp_path: Any
) -> None:
    other = sqlite3.connect(tmp_path / "other.db")
    wrong: list[Any] = ["postgresql://...", object()]
    if database.kind == "postgres":
        wrong.append(other)  # a sqlite3 connection handed to a PostgreSQL store
    try:
        for conn in wrong:
            with pytest.raises(TypeError, match="cannot submit on a"):
                client.submit("greet", {"name": "Ada"}, connection=conn)
    finally:
        other.close()
    assert client.list().items == []


def test_an_autocommit_connection_outside_a_transaction_is_refused(
    database: Database, client: tickwheel.Client
) -> None:
    if database.kind == "sqlite":
        conn: Any = sqlite3.connect(database.path or "", isolation_level=None)
    else:
        conn = psycopg.connect(database.url, autocommit=True)
    try:
        with pytest.raises(ValueError, match="autocommit"):
            client.submit("greet", {"name": "Ada"}, connection=conn)
        assert not _in_transaction(conn)
    finally:
        conn.close()
    assert client.list().items == []


async def test_an_asyncio_connection_needs_the_async_client(
    database: Database, client: tickwheel.Client
) -> None:
    conn: Any
    if database.kind == "sqlite":
        conn = await aiosqlite.connect(database.path or "")
    else:
        conn = await psycopg.AsyncConnection.connect(database.url)
    try:
        with pytest.raises(TypeError, match="connect_async"):
            client.submit("greet", {"name": "Ada"}, connection=conn)
    finally:
        await conn.close()


@pytest.mark.postgres
def test_the_schedulers_hear_of_it_only_at_the_commit(pg_database: Database) -> None:
    """The insert's NOTIFY is sent in the caller's transaction: PostgreSQL holds it until the
    commit (and drops it at a rollback)."""
    database = pg_database
    with (
        tickwheel.connect(database.url, tenant="acme") as client,
        psycopg.connect(database.url, autocommit=True) as listener,
        psycopg.connect(database.url) as conn,
    ):
        client.apply_definition(GREET_JSON, "json")
        listener.execute("LISTEN tickwheel_ready")
        client.submit("greet", {"name": "Ada"}, connection=conn)
        assert list(listener.notifies(timeout=0.2)) == []
        conn.rollback()
        assert list(listener.notifies(timeout=0.2)) == []
        client.submit("greet", {"name": "Bob"}, connection=conn)
        conn.commit()
        heard = list(listener.notifies(timeout=5, stop_after=1))
        assert [n.channel for n in heard] == ["tickwheel_ready"]


def test_a_sqlalchemy_session_submits_in_its_transaction(
    database: Database, client: tickwheel.Client
) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    orm = pytest.importorskip("sqlalchemy.orm")
    url = (
        f"sqlite:///{database.path}"
        if database.kind == "sqlite"
        else database.url.replace("postgresql://", "postgresql+psycopg://", 1)
    )
    engine = sqlalchemy.create_engine(url)
    try:
        with orm.Session(engine) as session:
            dropped = client.submit("greet", {"name": "Ada"}, connection=session)
            session.rollback()
            kept = client.submit("greet", {"name": "Bob"}, connection=session)
            session.commit()
    finally:
        engine.dispose()
    with pytest.raises(NotFound):
        client.get(dropped.execution_id)
    assert client.get(kept.execution_id).inputs == {"name": "Bob", "times": 1}


def test_a_batch_goes_in_with_the_callers_transaction(
    database: Database, client: tickwheel.Client
) -> None:
    requests = [
        tickwheel.SubmitRequest("greet", {"name": "Ada"}, idempotency_key="a"),
        tickwheel.SubmitRequest("greet", {"name": 7}),  # invalid: settled at once, others go on
        tickwheel.SubmitRequest("greet", {"name": "Ada"}, idempotency_key="a"),  # the same
    ]
    conn = _connect(database)
    try:
        dropped = client.submit_many(requests, connection=conn)
        assert [r.status for r in dropped] == [201, 422, 200]
        conn.rollback()
        assert client.list().items == []
        kept = client.submit_many(requests, connection=conn)
        assert _in_transaction(conn)
        conn.commit()
    finally:
        conn.close()
    assert [r.status for r in kept] == [201, 422, 200]
    assert kept[0].execution is not None
    [stored] = client.list().items
    assert stored.execution_id == kept[0].execution.execution_id


def test_the_blocking_client_answers_a_batch_with_receipts(
    database: Database, client: tickwheel.Client
) -> None:
    """``Client.submit_many(..., answer="ids")``, on its own and in the caller's transaction:
    the full answer's statuses, ids and errors as receipts."""
    requests = [
        tickwheel.SubmitRequest("greet", {"name": "Ada"}, idempotency_key="r"),
        tickwheel.SubmitRequest("greet", {"name": 7}),
        tickwheel.SubmitRequest("greet", {"name": "Bob"}, idempotency_key="r"),
    ]
    receipts = client.submit_many(requests, answer="ids")
    assert all(type(r) is tickwheel.SubmitReceipt for r in receipts)
    assert [r.status for r in receipts] == [201, 422, 409]
    [stored] = client.list().items
    assert receipts[0].execution_id == stored.execution_id
    assert receipts[1].error and receipts[1].error["code"] == "invalid_input"
    assert receipts[2].error and receipts[2].error["details"]["executionId"] == str(
        stored.execution_id
    )
    again = [tickwheel.SubmitRequest("greet", {"name": "Ada"}, idempotency_key=k) for k in "rs"]
    conn = _connect(database)
    try:
        in_tx = client.submit_many(again, connection=conn, answer="ids")
        conn.commit()
    finally:
        conn.close()
    assert [r.status for r in in_tx] == [200, 201]
    assert in_tx[0].execution_id == stored.execution_id
    assert {e.execution_id for e in client.list().items} == {
        stored.execution_id,
        in_tx[1].execution_id,
    }
    with pytest.raises(ValueError, match="answer"):
        client.submit_many(requests, answer="all")  # type: ignore[call-overload]
