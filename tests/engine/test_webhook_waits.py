"""How long an idle webhook sender waits between claims. While its store hears every process's
new deliveries (PostgreSQL with LISTEN in effect: every outbox write NOTIFYs the senders) it
waits ``heard_poll``, or until the earliest retry it recorded is due; a store that may miss them
(SQLite's) keeps the one-second poll. The waits are recorded, not slept; the wake-up itself is
sent from one store's transaction and heard by another's listener."""

from __future__ import annotations

from datetime import timedelta

import psycopg

from tests.engine.test_webhook_sender import Receiver, _sender, _subscribe, receiver
from tests.factories import T0
from tests.store.test_webhooks import _dead_letter
from tickwheel.domain.clock import FakeClock
from tickwheel.engine.webhooks import RETRY_SLACK, WebhookSender
from tickwheel.store.factory import webhook_store_for
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.protocol import Store

__all__ = ["receiver"]  # the fixture, shared


def recorded_waits(sender: WebhookSender) -> list[float]:
    timeouts: list[float] = []

    async def webhook_wait(timeout: float) -> bool:
        timeouts.append(timeout)
        return False

    sender.store.webhook_wait = webhook_wait  # type: ignore[method-assign]
    return timeouts


async def test_an_idle_sender_waits_for_new_deliveries_or_its_own_retry(
    store: Store, receiver: Receiver
) -> None:
    hears = isinstance(store, PostgresStore)
    if hears:
        assert await store.listen(5)
    receiver.answers = [500]
    webhook_id = await _subscribe(store, receiver.url)
    clock = FakeClock(T0 + timedelta(seconds=1))
    sender = _sender(store, clock)
    assert sender.store.webhook_hears_all() is hears
    waits = recorded_waits(sender)
    assert await sender.run_once() == 0
    await sender.idle(0)
    assert waits == [sender.heard_poll if hears else sender.poll_seconds]

    await _dead_letter(store)
    assert await sender.run_once() == 1  # answered 500: a retry recorded
    [row] = await sender.store.webhook_delivery_list("acme", webhook_id, 10)
    assert row.next_attempt_at is not None
    clock.advance(0.5)
    waits.clear()
    assert await sender.run_once() == 0  # not due yet
    await sender.idle(0)
    due_in = (row.next_attempt_at + RETRY_SLACK - clock.now()).total_seconds()
    assert waits == [max(min(sender.heard_poll, due_in), 0.0) if hears else sender.poll_seconds]
    clock.set(row.next_attempt_at + RETRY_SLACK)
    assert await sender.run_once() == 1  # the retry, delivered
    waits.clear()
    await sender.idle(0)
    assert waits == [sender.heard_poll if hears else sender.poll_seconds]  # taken: no more


async def test_a_dead_letter_in_one_process_wakes_the_senders_of_another(
    store: Store, pg_url: str
) -> None:
    if not isinstance(store, PostgresStore):
        return  # SQLite: in-process signals only; its senders poll
    other = await PostgresStore.open(pg_url, max_size=2)
    try:
        assert await store.listen(5)
        hooks = webhook_store_for(store)
        assert hooks.webhook_hears_all()
        await _subscribe(other, "http://127.0.0.1:9/hooks")
        assert not await hooks.webhook_wait(0.05)
        await _dead_letter(other)
        assert await hooks.webhook_wait(5)
        # No subscription listens to it: no delivery, no wake-up.
        await _dead_letter(other, tenant="globex")
        assert not await hooks.webhook_wait(0.3)
    finally:
        await other.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        [(n,)] = conn.execute("SELECT count(*) FROM webhook_deliveries").fetchall()
    assert n == 1
