"""The webhook sender against a real HTTP receiver on loopback (allowed explicitly, as an
operator would), on both backends, with the fake clock: signed bodies the receiver can verify,
retries with capped exponential back-off after a 500, every try recorded, and an address the
rules deny refused without a request."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.factories import T0
from tests.store.test_webhooks import _dead_letter
from tickwheel.domain.addresses import parse_networks
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.domain.webhooks import DeliveryStatus, WebhookEvent, WebhookSubscription, verify
from tickwheel.engine.webhooks import WebhookSender
from tickwheel.observability.metrics import Metrics
from tickwheel.store.factory import webhook_store_for
from tickwheel.store.protocol import Store

SECRET = "whsec_receiver_test"
LOOPBACK = RunPolicy(http_allow_networks=parse_networks(["127.0.0.0/8"]))


@dataclass
class Receiver:
    url: str
    answers: list[int]
    """Statuses to answer, in order; 200 once they run out."""
    got: list[tuple[dict[str, str], bytes]] = field(default_factory=list)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    box: list[Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            me = box[0]
            me.got.append(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(me.answers.pop(0) if me.answers else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    box.append(Receiver(f"http://127.0.0.1:{server.server_address[1]}/hooks", []))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield box[0]
    finally:
        server.shutdown()
        server.server_close()


async def _subscribe(store: Store, url: str) -> uuid.UUID:
    sub = WebhookSubscription(
        uuid.uuid4(), "acme", url, (WebhookEvent.EXECUTION_FAILED,), SECRET, T0
    )
    await webhook_store_for(store).webhook_insert(sub)
    return sub.webhook_id


def _sender(store: Store, clock: FakeClock, policy: RunPolicy = LOOPBACK) -> WebhookSender:
    sender = WebhookSender(
        webhook_store_for(store), policy=policy, clock=clock, base_delay=10, max_delay=60
    )
    sender.metrics = Metrics()
    sender.random.seed(7)
    return sender


async def test_a_dead_letter_reaches_the_receiver_signed(store: Store, receiver: Receiver) -> None:
    webhook_id = await _subscribe(store, receiver.url)
    execution_id = await _dead_letter(store)
    clock = FakeClock(T0 + timedelta(seconds=1))
    sender = _sender(store, clock)
    assert await sender.run_once() == 1
    [(headers, body)] = receiver.got
    now = int(clock.now().timestamp())
    assert verify(SECRET, headers["tickwheel-signature"], body, now)
    assert not verify("whsec_other", headers["tickwheel-signature"], body, now)
    assert not verify(SECRET, headers["tickwheel-signature"], body + b" ", now)
    assert not verify(SECRET, headers["tickwheel-signature"], body, now + 3600)  # a replay
    assert headers["tickwheel-event"] == "execution.failed"
    assert str(execution_id).encode() in body
    [row] = await webhook_store_for(store).webhook_delivery_list("acme", webhook_id, 10)
    assert headers["tickwheel-delivery"] == str(row.delivery_id)
    assert (row.status, row.attempts, row.response_code) == (DeliveryStatus.DELIVERED, 1, 200)
    assert sender.metrics.value("tickwheel_webhook_deliveries_total", status="delivered") == 1
    assert await sender.run_once() == 0


async def test_a_500_is_retried_with_backoff_until_it_succeeds(
    store: Store, receiver: Receiver
) -> None:
    receiver.answers = [500, 503]
    webhook_id = await _subscribe(store, receiver.url)
    await _dead_letter(store)
    clock = FakeClock(T0 + timedelta(seconds=1))
    sender, hooks = _sender(store, clock), webhook_store_for(store)
    for attempt, cap, code in ((1, 10, 500), (2, 20, 503)):
        assert await sender.run_once() == 1
        [row] = await hooks.webhook_delivery_list("acme", webhook_id, 10)
        assert (row.status, row.attempts) == (DeliveryStatus.PENDING, attempt)
        assert (row.response_code, row.last_error) == (code, f"answered {code}")
        assert row.next_attempt_at is not None
        wait = (row.next_attempt_at - clock.now()).total_seconds()
        assert 0 <= wait <= cap  # full jitter under the doubling cap
        clock.set(row.next_attempt_at - timedelta(microseconds=1))
        assert await sender.run_once() == 0  # not due yet
        clock.set(row.next_attempt_at)
    assert await sender.run_once() == 1
    [row] = await hooks.webhook_delivery_list("acme", webhook_id, 10)
    assert (row.status, row.attempts, row.response_code) == (DeliveryStatus.DELIVERED, 3, 200)
    assert row.last_error is None and row.finished_at == clock.now()
    bodies = {body for _, body in receiver.got}
    ids = {headers["tickwheel-delivery"] for headers, _ in receiver.got}
    assert len(receiver.got) == 3 and len(bodies) == 1 and ids == {str(row.delivery_id)}


async def test_the_last_attempt_fails_the_delivery_for_good(
    store: Store, receiver: Receiver
) -> None:
    receiver.answers = [500, 500]
    webhook_id = await _subscribe(store, receiver.url)
    await _dead_letter(store)
    clock = FakeClock(T0 + timedelta(seconds=1))
    sender = _sender(store, clock)
    sender.max_attempts = 2
    assert await sender.run_once() == 1
    clock.advance(120)
    assert await sender.run_once() == 1
    [row] = await webhook_store_for(store).webhook_delivery_list("acme", webhook_id, 10)
    assert (row.status, row.attempts, row.next_attempt_at) == (DeliveryStatus.FAILED, 2, None)
    clock.advance(3600)
    assert await sender.run_once() == 0


async def test_a_denied_address_is_refused_without_a_request(
    store: Store, receiver: Receiver
) -> None:
    """Loopback without the operator's allowance: the address the host resolves to is judged
    (here a name, ``localhost``, that the resolver turns into 127.0.0.1)."""
    url = receiver.url.replace("127.0.0.1", "localhost")
    webhook_id = await _subscribe(store, url)
    await _dead_letter(store)
    sender = _sender(store, FakeClock(T0 + timedelta(seconds=1)), RunPolicy())
    assert await sender.run_once() == 1
    assert receiver.got == []
    [row] = await webhook_store_for(store).webhook_delivery_list("acme", webhook_id, 10)
    assert (row.status, row.attempts, row.response_code) == (DeliveryStatus.FAILED, 1, None)
    assert row.last_error is not None and "a loopback address" in row.last_error


async def test_finished_deliveries_are_pruned_after_the_retention(
    store: Store, receiver: Receiver
) -> None:
    webhook_id = await _subscribe(store, receiver.url)
    hooks = webhook_store_for(store)
    await _dead_letter(store)
    clock = FakeClock(T0 + timedelta(seconds=1))
    sender = _sender(store, clock)
    sender.retention, sender.prune_every = timedelta(days=1), timedelta(hours=1)
    assert await sender.run_once() == 1  # delivered at T0 + 1 s
    receiver.answers = [500]
    await _dead_letter(store)  # PENDING when the prune comes: kept
    clock.advance(1)
    assert await sender.run_once() == 1
    assert len(await hooks.webhook_delivery_list("acme", webhook_id, 10)) == 2
    clock.set(T0 + timedelta(days=1, seconds=3))  # past the retention of the delivered one
    await sender.run_once()
    [left] = await hooks.webhook_delivery_list("acme", webhook_id, 10)
    assert (left.status, left.attempts) == (DeliveryStatus.DELIVERED, 2)  # kept, then retried
