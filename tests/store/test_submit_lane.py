"""The single submissions' lane (``store/postgres/submit_lane.py``): one execution's insert on
a connection the lane keeps, through libpq, with the pool's answers kept: the same outcomes and
rows, the pool beside it when it is busy, ``Unavailable`` for a session lost under a statement,
a session ended while idle given back, a cancelled wait cancelling its statement, a
statement the server refuses raised as psycopg raises it, with nothing stored; and, through a
proxy (``tcp_proxy.py``), an answer that never comes ending in ``Unavailable`` and a backend
gone without a word leaving its socket's number free for the next socket at once."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from tests.factories import new_execution
from tests.store.lane_helpers import WAIT_S, open_store, opened_store, until
from tests.store.tcp_proxy import proxy_to
from tickwheel.domain.errors import Unavailable
from tickwheel.store.postgres import submit_lane
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.postgres.submit_lane import SubmitLane, first_uuid, positional

pytestmark = pytest.mark.postgres

_TABLES = "execution_events, attempts, executions, definitions"


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[PostgresStore]:
    async with opened_store(pg_url, 3, min_size=2) as s:
        await _truncate(pg_url)
        yield s


async def _truncate(pg_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute(f"TRUNCATE {_TABLES} CASCADE")


def _lane(store: PostgresStore) -> SubmitLane:
    assert store._lane is not None
    return store._lane


def _lane_pid(store: PostgresStore) -> int:
    conn = _lane(store)._conn
    assert conn is not None, "the lane holds no connection"
    return conn.pgconn.backend_pid


async def _count(pg_url: str, key: str) -> int:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        row = await (
            await conn.execute("SELECT count(*) FROM executions WHERE idempotency_key = %s", [key])
        ).fetchone()
        assert row is not None
        return int(row[0])


async def _state(pg_url: str, pid: int) -> tuple[Any, ...] | None:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        return await (
            await conn.execute(
                "SELECT state, wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]
            )
        ).fetchone()


async def _waiting_on_lock(pg_url: str, pid: int) -> bool:
    state = await _state(pg_url, pid)
    return state is not None and state[1] == "Lock"


@pytest.mark.parametrize(
    "text",
    [
        "00000000-0000-0000-0000-000000000000",
        "019ca945-38e0-7fc1-ac6b-dd6af1fcd7ec",
        "ffffffff-ffff-ffff-ffff-ffffffffffff",
    ],
)
def test_a_returned_id_is_the_uuid_of_its_text(text: str) -> None:
    class Result:
        def get_value(self, row: int, column: int) -> bytes:
            assert (row, column) == (3, 0)
            return text.encode()

    [made] = first_uuid(Result(), 3)  # type: ignore[arg-type]
    assert made == uuid.UUID(text) and str(made) == text
    assert hash(made) == hash(uuid.UUID(text))


def test_placeholders_become_numbered_parameters() -> None:
    sql, names = positional("SELECT %(a)s::int, %(b)s, %(a)s")
    assert sql == b"SELECT $1::int, $2, $1"
    assert names == ("a", "b")
    with pytest.raises(ValueError, match="placeholders"):
        positional("SELECT 100 %% 7, %(a)s")


async def test_a_single_insert_runs_on_the_lane_and_a_repeat_finds_the_first(
    store: PostgresStore, pg_url: str
) -> None:
    first = new_execution(key="k1")
    [created] = await store.execution_insert_many([first])
    assert created.created and created.execution.execution_id == first.execution_id
    pid = _lane_pid(store)
    # The same key again (another id, as another API node would make): the stored execution.
    [again] = await store.execution_insert_many([new_execution(key="k1")])
    assert not again.created
    assert again.execution.execution_id == first.execution_id
    assert again.execution.request_fingerprint == first.request_fingerprint
    # Another tenant's same key is its own execution.
    [theirs] = await store.execution_insert_many([new_execution("globex", key="k1")])
    assert theirs.created and theirs.execution.tenant == "globex"
    assert _lane_pid(store) == pid  # one connection kept throughout
    assert await _count(pg_url, "k1") == 2
    stored = await store.execution_get("acme", first.execution_id)
    assert stored is not None and stored == created.execution


async def test_concurrent_single_inserts_use_the_pool_beside_the_busy_lane(
    store: PostgresStore, pg_url: str
) -> None:
    items = [new_execution(key=f"c{n}") for n in range(20)]
    outcomes = await asyncio.gather(*(store.execution_insert_many([i]) for i in items))
    assert [o.execution.execution_id for [o] in outcomes] == [i.execution_id for i in items]
    assert all(o.created for [o] in outcomes)
    for n in range(20):
        assert await _count(pg_url, f"c{n}") == 1


async def test_a_session_ended_while_idle_is_given_back_and_submissions_go_on(
    store: PostgresStore, pg_url: str
) -> None:
    await store.execution_insert_many([new_execution(key="before")])
    pid = _lane_pid(store)
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
        await admin.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])

    async def noticed() -> bool:
        return _lane(store)._suspect

    await until(noticed, "the lane hears the server end its session")
    [after] = await store.execution_insert_many([new_execution(key="after")])
    assert after.created
    [later] = await store.execution_insert_many([new_execution(key="later")])
    assert later.created
    assert _lane_pid(store) != pid
    assert await _count(pg_url, "after") == await _count(pg_url, "later") == 1


async def test_a_session_lost_under_the_statement_is_unavailable_and_stores_nothing(
    store: PostgresStore, pg_url: str
) -> None:
    await store.execution_insert_many([new_execution(key="warm")])
    pid = _lane_pid(store)
    async with await psycopg.AsyncConnection.connect(pg_url) as blocker:
        await blocker.execute("LOCK TABLE executions IN ACCESS EXCLUSIVE MODE")
        task = asyncio.create_task(store.execution_insert_many([new_execution(key="lost")]))
        await until(lambda: _waiting_on_lock(pg_url, pid), "the insert waits for the lock")
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
            await admin.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])
        with pytest.raises(Unavailable):
            await task
        await blocker.rollback()
    assert _lane(store)._conn is None
    assert await _count(pg_url, "lost") == 0
    [next_one] = await store.execution_insert_many([new_execution(key="next")])
    assert next_one.created


async def test_a_cancelled_submission_cancels_its_statement(
    store: PostgresStore, pg_url: str
) -> None:
    await store.execution_insert_many([new_execution(key="warm")])
    pid = _lane_pid(store)
    async with await psycopg.AsyncConnection.connect(pg_url) as blocker:
        await blocker.execute("LOCK TABLE executions IN ACCESS EXCLUSIVE MODE")
        task = asyncio.create_task(store.execution_insert_many([new_execution(key="gone")]))
        await until(lambda: _waiting_on_lock(pg_url, pid), "the insert waits for the lock")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await blocker.rollback()

    async def ended() -> bool:
        return await _state(pg_url, pid) is None

    await until(ended, "the lane's session ends")
    # Left running, the insert would have taken the lock at the rollback and committed.
    assert await _count(pg_url, "gone") == 0
    [next_one] = await store.execution_insert_many([new_execution(key="next")])
    assert next_one.created


async def test_a_refused_statement_raises_psycopgs_error_and_stores_nothing(
    store: PostgresStore, pg_url: str
) -> None:
    await store.execution_insert_many([new_execution(key="warm")])
    pid = _lane_pid(store)
    hostile = new_execution(key="nul\x00key")  # JSON writes \u0000, which text cannot hold
    with pytest.raises(psycopg.Error) as on_lane:
        await store.execution_insert_many([hostile])
    assert _lane_pid(store) == pid  # a statement's error leaves the session usable
    lane, store._lane = store._lane, None  # the pool's path, for the same item
    try:
        with pytest.raises(psycopg.Error) as on_pool:
            await store.execution_insert_many([hostile])
    finally:
        store._lane = lane
    assert type(on_lane.value) is type(on_pool.value)
    assert on_lane.value.sqlstate == on_pool.value.sqlstate
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        row = await (await conn.execute("SELECT count(*) FROM executions")).fetchone()
        assert row is not None and row[0] == 1
    [fine] = await store.execution_insert_many([new_execution(key="fine")])
    assert fine.created and _lane_pid(store) == pid


async def test_a_deallocated_statement_is_prepared_again(store: PostgresStore) -> None:
    await store.execution_insert_many([new_execution(key="first")])
    lane = _lane(store)
    conn = lane._conn
    assert conn is not None
    pgconn = conn.pgconn
    lane._busy = True  # as while it runs a statement of its own
    try:
        await lane._roundtrip(pgconn, lambda: pgconn.send_query(b"DEALLOCATE ALL"))
    finally:
        lane._busy = False
    [second] = await store.execution_insert_many([new_execution(key="second")])
    assert second.created and lane._conn is conn


async def test_a_pool_of_one_has_no_lane(pg_url: str) -> None:
    async with opened_store(pg_url, 1) as s:
        [one] = await s.execution_insert_many([new_execution(key="only-pool")])
        assert one.created
        assert s._lane is not None and s._lane._conn is None


async def test_a_caller_on_another_event_loop_goes_through_the_pool(
    store: PostgresStore, pg_url: str
) -> None:
    """A blocking ``Client`` runs the store from its own thread's loop: the lane keeps out of
    it (taking the pool's idle connection there would make the pool grow on a loop that may be
    blocked waiting for that very call)."""

    def in_another_loop() -> bool:
        async def body() -> bool:
            [one] = await store.execution_insert_many([new_execution(key="other-loop")])
            return one.created

        return asyncio.run(body())

    assert await asyncio.to_thread(in_another_loop)
    assert _lane(store)._conn is None
    assert await _count(pg_url, "other-loop") == 1


async def test_a_session_that_no_longer_takes_writes_is_dropped_and_unavailable(
    store: PostgresStore, pg_url: str
) -> None:
    """As on the pool's path (a primary just demoted): 503, and the session closed so that the
    next one goes to whichever node takes writes."""
    await store.execution_insert_many([new_execution(key="warm")])
    lane = _lane(store)
    conn = lane._conn
    assert conn is not None
    pgconn = conn.pgconn
    lane._busy = True
    try:
        await lane._roundtrip(
            pgconn, lambda: pgconn.send_query(b"SET default_transaction_read_only = on")
        )
    finally:
        lane._busy = False
    with pytest.raises(Unavailable):
        await store.execution_insert_many([new_execution(key="refused")])
    assert conn.closed and lane._conn is None
    assert await _count(pg_url, "refused") == 0
    [next_one] = await store.execution_insert_many([new_execution(key="next")])
    assert next_one.created


async def test_a_kept_connection_is_not_used_from_another_event_loop(
    store: PostgresStore, pg_url: str
) -> None:
    """Its socket is watched by the pool's loop: a statement sent from another loop would wait
    for an answer that loop never hears about."""
    await store.execution_insert_many([new_execution(key="here")])
    pid = _lane_pid(store)

    def in_another_loop() -> bool:
        async def body() -> bool:
            [one] = await store.execution_insert_many([new_execution(key="there")])
            return one.created

        return asyncio.run(body())

    assert await asyncio.wait_for(asyncio.to_thread(in_another_loop), WAIT_S)
    assert _lane_pid(store) == pid
    assert await _count(pg_url, "there") == 1


async def test_the_kept_connection_goes_back_when_the_pool_has_none_idle(pg_url: str) -> None:
    """Two connections at most: one with the lane, one held by a caller. A third caller gets
    the lane's at once instead of waiting (here: instead of the pool's 2 s timeout)."""
    s = await open_store(pg_url, 2, timeout=2)
    try:
        await s.execution_insert_many([new_execution(key="lane-first")])
        assert _lane(s)._conn is not None
        async with s.pool.connection() as held:
            await held.execute("SELECT 1")
            assert await s.execution_get("acme", new_execution().execution_id) is None
            assert _lane(s)._conn is None
        [after] = await s.execution_insert_many([new_execution(key="lane-again")])
        assert after.created and _lane(s)._conn is not None
    finally:
        await s.close()


async def test_closed_from_another_loop_it_stops_watching_the_socket_on_its_own(
    store: PostgresStore,
) -> None:
    await store.execution_insert_many([new_execution(key="watched")])
    lane = _lane(store)
    fd = lane._fd

    def close_elsewhere() -> None:
        asyncio.run(lane.close())

    await asyncio.to_thread(close_elsewhere)
    await asyncio.sleep(0)  # the removal was handed to this loop
    assert lane._conn is None
    assert not asyncio.get_running_loop().remove_reader(fd)  # no longer registered here


async def test_an_answer_that_never_comes_is_unavailable_and_the_lane_goes_on(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(submit_lane, "ANSWER_WAIT", 0.5, raising=False)
    async with proxy_to(pg_url) as proxy, opened_store(proxy.url(pg_url), 3, 2) as store:
        await _truncate(pg_url)
        first = new_execution(key="warm")
        await store.execution_insert_many([first])
        lane = _lane(store)
        assert lane._conn is not None
        # The server runs the insert and commits it; its answer never reaches the lane.
        proxy.link_of(lane._conn.pgconn.socket).hold()
        held = new_execution(key="held")
        with pytest.raises(Unavailable, match="did not answer"):
            await asyncio.wait_for(store.execution_insert_many([held]), WAIT_S)
        assert lane._conn is None
        # The 503 said "retry": the same key finds the execution the unanswered insert stored.
        [again] = await store.execution_insert_many([new_execution(key="held")])
        assert not again.created and again.execution.execution_id == held.execution_id
        [next_one] = await store.execution_insert_many([new_execution(key="next")])
        assert next_one.created
        assert await _count(pg_url, "held") == 1


async def _number_serves_a_new_socket(fd: int) -> bool:
    """Whether a socket given the number ``fd`` (closed by libpq) is heard by the event loop."""
    with pytest.raises(OSError):
        os.fstat(fd)  # closed: the number is free (else it would be the connection's own)
    ours, theirs = socket.socketpair()  # may take the number itself, the lowest free one
    copied = ours.fileno() != fd
    if copied:
        os.dup2(ours.fileno(), fd)
    loop = asyncio.get_running_loop()
    heard = loop.create_future()
    loop.add_reader(fd, lambda: heard.done() or heard.set_result(None))
    try:
        theirs.send(b"x")
        await asyncio.wait_for(heard, 1.0)
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)
        if copied:
            os.close(fd)
        ours.close()
        theirs.close()


async def test_a_backend_gone_without_a_word_frees_its_socket_number_at_once(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with proxy_to(pg_url) as proxy, opened_store(proxy.url(pg_url), 3, 2) as store:
        await _truncate(pg_url)
        await store.execution_insert_many([new_execution(key="warm")])
        fd, pid = _lane(store)._fd, _lane_pid(store)
        link = proxy.link_of(fd)
        pool = store.pool
        lost = pool.lost
        served: list[bool] = []

        async def probed(exc: psycopg.Error, conn: Any) -> Unavailable:
            # Another task, while the lane is still handling its lost session, gets the
            # socket number that libpq just closed: the loop must hear that socket.
            served.append(await _number_serves_a_new_socket(fd))
            return await lost(exc, conn)

        monkeypatch.setattr(pool, "lost", probed)
        async with await psycopg.AsyncConnection.connect(pg_url) as blocker:
            await blocker.execute("LOCK TABLE executions IN ACCESS EXCLUSIVE MODE")
            task = asyncio.create_task(store.execution_insert_many([new_execution(key="cut")]))
            await until(lambda: _waiting_on_lock(pg_url, pid), "the insert waits for the lock")
            link.cut()  # the far end closes with no message, as a backend that died
            with pytest.raises(Unavailable):
                await asyncio.wait_for(task, WAIT_S)
            await blocker.rollback()
        assert served == [True]
        monkeypatch.undo()
        [next_one] = await store.execution_insert_many([new_execution(key="next")])
        assert next_one.created
