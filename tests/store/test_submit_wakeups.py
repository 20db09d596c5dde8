"""The lanes' READY wake-ups, one in flight at a time (``store/postgres/submit_lanes.py``): of
submissions in flight together one carries the NOTIFY, the others owe theirs; a debt is paid by a
carrier that starts after it and inserts, or sent alone once nothing is in flight; never a
wake-up for a row not inserted, and a lone submission notifies in its own statement as before."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from tests.factories import new_execution
from tests.store.lane_helpers import lanes_of, opened_store
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.postgres.submit_lanes import MAX_LANES, NO_WAKEUP, SubmitLanes

pytestmark = pytest.mark.postgres


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[PostgresStore]:
    async with opened_store(pg_url, 8) as s:
        yield s


async def _heard(listener: psycopg.AsyncConnection[Any]) -> list[str]:
    return [n.channel async for n in listener.notifies(timeout=0.5)]


async def test_submissions_in_flight_together_share_wakeups(
    pg_url: str, store: PostgresStore
) -> None:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as listener:
        await listener.execute("LISTEN tickwheel_ready")
        for round_ in range(3):
            items = [new_execution(key=f"wake-{uuid.uuid4()}") for _ in range(MAX_LANES)]
            outcomes = await asyncio.gather(*(store.execution_insert_many([i]) for i in items))
            assert all(o.created for [o] in outcomes)
            heard = await _heard(listener)
            # The carrier's and the debt sent once all ended: fewer than one per row, never none.
            assert 1 <= len(heard) < len(items), (round_, heard)
            assert set(heard) == {"tickwheel_ready"}
            # The same submissions again, together: nothing inserted, nobody woken.
            again = await asyncio.gather(*(store.execution_insert_many([i]) for i in items))
            assert not any(o.created for [o] in again)
            assert await _heard(listener) == []
        # Alone, each submission carries its own wake-up, as before.
        for _ in range(2):
            [alone] = await store.execution_insert_many([new_execution(key=f"w-{uuid.uuid4()}")])
            assert alone.created
            assert await _heard(listener) == ["tickwheel_ready"]


class _Scripted:
    """Stands in for the lanes' statements: each call waits until the test ends it, with the
    rows it says (an inserted row or none), and records the ``notify`` it was given."""

    def __init__(self, lanes: SubmitLanes, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, asyncio.Future[list[Any]]]] = []
        self.sent: list[str] = []
        for lane in lanes.lanes:
            monkeypatch.setattr(lane, "run", self._runner(lane))
        monkeypatch.setattr(lanes, "_notify", self._notify)

    def _runner(self, lane: Any) -> Any:
        async def run(params: dict[str, Any]) -> list[Any]:
            lane._busy = True
            try:
                done: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
                self.calls.append((params["notify"], done))
                return await done
            finally:
                lane._busy = False

        return run

    async def _notify(self, notify: str) -> None:
        self.sent.append(notify)


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_debt_is_paid_only_after_the_commit_that_owes_it(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    lanes = lanes_of(store)
    script = _Scripted(lanes, monkeypatch)
    wake = store.signals.insert_notifications({new_execution().status}, [])
    params = {"notify": wake}
    a = asyncio.create_task(lanes.run(params))
    b = asyncio.create_task(lanes.run(params))
    c = asyncio.create_task(lanes.run(params))
    await _settle()
    # The first carries the wake-up; the two beside it go without.
    assert [n for n, _ in script.calls] == [wake, NO_WAKEUP, NO_WAKEUP]
    script.calls[1][1].set_result([("b",)])  # b inserted: it owes its wake-up
    await b
    script.calls[0][1].set_result([("a",)])  # a's NOTIFY came with a commit that may precede b's
    await a
    await _settle()
    assert script.sent == []  # c is still in flight: nothing sent yet
    d = asyncio.create_task(lanes.run(params))
    await _settle()
    assert script.calls[3][0] == wake  # d starts after b ended: it carries b's debt
    script.calls[3][1].set_result([])  # ... but inserts nothing, so notifies nothing
    await d
    script.calls[2][1].set_result([("c",)])
    await c
    await _settle()
    assert script.sent == [wake]  # once nothing is in flight, the debt is sent, once
    # A carrier that inserts pays what it took over.
    e = asyncio.create_task(lanes.run(params))
    f = asyncio.create_task(lanes.run(params))
    await _settle()
    script.calls[5][1].set_result([("f",)])
    await f
    g = asyncio.create_task(lanes.run(params))
    await _settle()
    assert script.calls[6][0] == NO_WAKEUP  # e still carries: g goes without
    script.calls[4][1].set_result([("e",)])
    await e
    h = asyncio.create_task(lanes.run(params))
    await _settle()
    assert script.calls[7][0] == wake  # takes f's debt
    script.calls[6][1].set_result([])  # g inserted nothing: owes nothing
    await g
    script.calls[7][1].set_result([("h",)])
    await h
    await _settle()
    assert script.sent == [wake]  # h paid f's: nothing more sent


async def test_a_failed_submission_without_its_wakeup_owes_it(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    lanes = lanes_of(store)
    script = _Scripted(lanes, monkeypatch)
    wake = store.signals.insert_notifications({new_execution().status}, [])
    a = asyncio.create_task(lanes.run({"notify": wake}))
    b = asyncio.create_task(lanes.run({"notify": wake}))
    await _settle()
    script.calls[1][1].set_exception(psycopg.OperationalError("lost"))
    with pytest.raises(psycopg.OperationalError):
        await b
    script.calls[0][1].set_result([("a",)])
    await a
    await _settle()
    assert script.sent == [wake]  # committed or not: a wake-up that finds nothing is harmless
