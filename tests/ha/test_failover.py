"""The database's own failover under load, with real processes: an API, two schedulers and two
workers on the rig's multi-host URL while a client submits steadily; the primary's postmaster is
SIGKILLed (Patroni fails over to the synchronous standby and brings the old primary back as a
standby), then a planned switch-over moves the primary back.

Counted and asserted: every execution acknowledged with 201/200 exists afterwards and ends
SUCCEEDED; the API answered nothing but 201/200 and 503 (with ``Retry-After``); every handler
ran under a claim the database still has, and a second run of one execution only after its
earlier attempt was recorded ABANDONED (a lost lease); the committed result carries the newest
fencing token. Printed: the time without a primary and until throughput recovered, for both."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.ha.conftest import DATABASE, FIGURES, start_api
from tests.processes.conftest import Cluster, Db, Record

pytestmark = [pytest.mark.ha, pytest.mark.timeout(420)]

LEASE = 5.0  # worker lease: longer than a failover here, so in-flight attempts mostly survive it
INTERVAL = 0.05  # between submissions (one client, one at a time)
WARM = 40  # completions before the first fault, and between the phases
RECOVERED = 0.5  # throughput has recovered at this share of the rate before the fault
WINDOW = 1.0
PAUSE = 1.0  # a gap this long between acknowledgements or completions is the fault's doing


@dataclass
class Answer:
    mono: float
    status: int | None  # None: no HTTP answer (the API itself was unreachable)
    retry_after: str | None = None


@dataclass(eq=False)  # a thread must stay hashable
class Submitter(threading.Thread):
    """One client submitting steadily: each submission has its own idempotency key and is
    repeated with it after a 503 until acknowledged (a 503 on a write that did commit then
    returns the original with 200). A third of them are due a second later, for the
    schedulers."""

    api: str
    key: str
    acked: dict[uuid.UUID, float] = field(default_factory=dict)
    answers: list[Answer] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        super().__init__(name="ha-submitter", daemon=True)

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.key}"}
        with httpx.Client(base_url=self.api, headers=headers, timeout=15) as http:
            n = 0
            while not self.stopping.is_set():
                n += 1
                body: dict[str, Any] = {
                    "definitionUri": "registry://jobs/slow",
                    "inputs": {"seconds": 0.2},
                }
                if n % 3 == 0:
                    body["executeAt"] = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
                self._until_acknowledged(http, body, f"ha-{n}")
                self.stopping.wait(INTERVAL)

    def _until_acknowledged(self, http: httpx.Client, body: dict[str, Any], key: str) -> None:
        give_up = time.monotonic() + 120
        while time.monotonic() < give_up:
            try:
                r = http.post("/v1/executions", json=body, headers={"Idempotency-Key": key})
            except httpx.TransportError:
                self.answers.append(Answer(time.monotonic(), None))
                time.sleep(0.1)
                continue
            retry_after = r.headers.get("Retry-After")
            self.answers.append(Answer(time.monotonic(), r.status_code, retry_after))
            if r.status_code in (200, 201):
                self.acked[uuid.UUID(r.json()["executionId"])] = time.monotonic()
                return
            if r.status_code != 503:
                return  # recorded: the test fails on any answer but 201/200/503
            time.sleep(0.1)  # shorter than Retry-After: the test measures the outage


@dataclass
class Fault:
    name: str
    started: float
    primary_gone: float = 0.0  # the old primary answered as such for the last time
    primary_back: float = 0.0  # the other node answers as primary
    writes_blocked: float = 0.0  # the fault's pause between acknowledgements
    longest_pause: float = 0.0  # between completions, in the minute after the fault
    recovered: float | None = None  # completions back at RECOVERED of the earlier rate


def test_failover_and_switchover_under_load(
    rig: Any, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    url = rig.url(DATABASE)
    cluster = Cluster(url, tmp_path, Db(url))
    submitter: Submitter | None = None
    try:
        api, key = start_api(cluster)
        for _ in range(2):
            cluster.scheduler()
        for n in (1, 2):
            cluster.worker(f"w{n}", lease=LEASE)
        cluster.wait_listening(4)
        cluster.db.close()
        submitter = Submitter(api, key)
        submitter.start()
        ends = lambda: [r for r in cluster.journal.records() if r.event == "end"]  # noqa: E731
        cluster.eventually(lambda: len(ends()) >= WARM, 60, "the first completions")

        # 1. The primary's postmaster dies: Patroni promotes the synchronous standby.
        victim = rig.primary()
        crash = Fault("kill -9 of the primary's postmaster", time.monotonic())
        rig.kill_postmaster(victim)
        _watch_primary(rig, crash, victim)
        # ... and brings the old primary back as the synchronous standby.
        cluster.eventually(lambda: rig.sync_standby() == victim, 120, "the old primary to rejoin")
        rejoined = time.monotonic()
        done = len(ends())
        cluster.eventually(lambda: len(ends()) >= done + WARM, 60, "completions after the rejoin")

        # 2. A planned switch-over back to the old primary.
        switch = Fault("planned switch-over", time.monotonic())
        switching = threading.Thread(target=rig.switchover, args=(victim,), daemon=True)
        switching.start()
        _watch_primary(rig, switch, rig.primary())
        switching.join(60)
        cluster.eventually(rig.healthy, 120, "a synchronous standby after the switch-over")
        done = len(ends())
        cluster.eventually(lambda: len(ends()) >= done + WARM, 60, "completions afterwards")
        submitter.stopping.set()
        submitter.join(150)
        assert not submitter.is_alive()

        cluster.db = Db(url)
        acked = list(submitter.acked)
        cluster.eventually(
            lambda: _succeeded(cluster.db, acked) == len(acked), 90, "every acknowledged run"
        )
        # Every scheduler and worker LISTENs again, on the primary of now.
        cluster.wait_listening(4)
        records = cluster.journal.records()
        _check_answers(submitter.answers)
        reruns = _check_runs(cluster.db, acked, records)
        faults = [crash, switch]
        for fault in faults:
            _measure(fault, submitter.answers, [r.mono for r in records if r.event == "end"])
        report = _report(faults, submitter, rejoined - crash.started, len(acked), reruns)
        record_property(FIGURES, report)
        for fault in faults:
            assert fault.recovered is not None, f"throughput never recovered after {fault.name}"
    finally:
        if submitter is not None:
            submitter.stopping.set()
        cluster.close()
        cluster.db.close()


def _writable(rig: Any) -> str | None:
    """The node that takes writes now, asked directly (Patroni's own view lags by a loop)."""
    for name in rig.state["nodes"]:
        try:
            with psycopg.connect(rig.node_url(name), connect_timeout=1) as conn:
                row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        except psycopg.Error:
            continue
        if row is not None and not row[0]:
            return str(name)
    return None


def _watch_primary(rig: Any, fault: Fault, old: str) -> None:
    """Polls both nodes until another one than ``old`` takes writes."""
    fault.primary_gone = fault.started
    deadline = fault.started + 90
    while time.monotonic() < deadline:
        primary, at = _writable(rig), time.monotonic()
        if primary == old:
            fault.primary_gone = at
        elif primary is not None:
            fault.primary_back = at
            return
        time.sleep(0.05)
    raise AssertionError(f"no primary other than {old} within 90 s\n{rig.logs()}")


def _succeeded(db: Db, ids: list[uuid.UUID]) -> int:
    [row] = db.rows(
        "SELECT count(*) AS n FROM executions"
        " WHERE execution_id = ANY(%s) AND status = 'SUCCEEDED'",
        (ids,),
    )
    return int(row["n"])


def _check_answers(answers: list[Answer]) -> None:
    statuses = Counter(a.status for a in answers)
    # None would be the API itself unreachable: it is never stopped here.
    assert set(statuses) <= {200, 201, 503}, f"unexpected answers: {statuses}"
    assert all(a.retry_after for a in answers if a.status == 503), "a 503 without Retry-After"


def _check_runs(db: Db, acked: list[uuid.UUID], records: list[Record]) -> int:
    """Each acknowledged execution exists, SUCCEEDED once, with the newest token committed; a
    handler ran again only after its earlier attempt was recorded as a lost lease. Returns how
    many handlers ran again so."""
    rows = {
        r["execution_id"]: r
        for r in db.rows("SELECT * FROM executions WHERE execution_id = ANY(%s)", (acked,))
    }
    assert set(rows) == set(acked), f"acknowledged but missing: {set(acked) - set(rows)}"
    attempts: dict[uuid.UUID, list[Any]] = defaultdict(list)
    for a in db.rows(
        "SELECT execution_id, attempt_number, status, fencing_token FROM attempts"
        " WHERE execution_id = ANY(%s) ORDER BY attempt_number",
        (acked,),
    ):
        attempts[a["execution_id"]].append(a)
    reruns = 0
    starts: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.event == "start":
            starts[r.execution_id].append(r)
    for eid, row in rows.items():
        assert row["status"] == "SUCCEEDED", row
        tries = attempts[eid]
        won = [a for a in tries if a["status"] == "SUCCEEDED"]
        assert len(won) == 1, tries
        newest = max(a["fencing_token"] for a in tries)
        assert row["fencing_token"] == won[0]["fencing_token"] == newest, (row, tries)
        assert row["output"]["token"] == newest, (row, tries)
        by_token = {a["fencing_token"]: a for a in tries}
        for start in starts[str(eid)]:
            attempt = by_token.get(start.token)
            assert attempt is not None, f"{eid}: a handler ran under a claim the database lost"
            assert attempt["status"] in ("SUCCEEDED", "ABANDONED"), (start, tries)
        ran = Counter(s.token for s in starts[str(eid)])
        assert all(n == 1 for n in ran.values()), f"{eid}: one claim ran twice: {ran}"
        reruns += max(0, len(ran) - 1)
    return reruns


def _first_pause(times: list[float], after: float) -> tuple[float, float] | None:
    """The first pause of at least ``PAUSE`` between consecutive ``times`` that ends after
    ``after``: (its length, its end)."""
    for a, b in pairwise(times):
        if b > after and b - a >= PAUSE:
            return b - a, b
    return None


def _measure(fault: Fault, answers: list[Answer], ends: list[float]) -> None:
    """The fault's pause in acknowledgements; when completions, after their pause, came back to
    ``RECOVERED`` of the rate before the fault; the longest pause in completions in the minute
    after it (the old primary's rejoin may stall commits again)."""
    start, stop = fault.started - 1, fault.started + 60
    acks = [a.mono for a in answers if a.status in (200, 201) and start <= a.mono <= stop]
    pause = _first_pause(acks, fault.started)
    fault.writes_blocked = pause[0] if pause else 0.0
    before = [t for t in ends if fault.started - 3 * WINDOW <= t < fault.started]
    rate = len(before) / (3 * WINDOW)
    done = sorted(t for t in ends if start <= t <= stop)
    fault.longest_pause = max((b - a for a, b in pairwise(done)), default=0.0)
    pause = _first_pause(done, fault.started)
    after = [t for t in done if t >= (pause[1] if pause else fault.started)]
    for i, t in enumerate(after):  # the first second-long window at the earlier rate's share
        in_window = sum(1 for u in after[i:] if u < t + WINDOW)
        if in_window >= max(1.0, RECOVERED * rate * WINDOW):
            fault.recovered = t
            return


def _report(
    faults: list[Fault], submitter: Submitter, rejoin: float, acked: int, reruns: int
) -> str:
    statuses = Counter(a.status for a in submitter.answers)
    lines = [
        f"HA: {acked} executions acknowledged, all SUCCEEDED; answers {dict(statuses)};"
        f" handlers run again after a lost lease: {reruns}"
    ]
    for f in faults:
        recovered = f"{f.recovered - f.started:.2f} s" if f.recovered else "never"
        lines.append(
            f"HA: {f.name}: no primary for {f.primary_back - f.primary_gone:.2f} s, no write"
            f" acknowledged for {f.writes_blocked:.2f} s, throughput recovered {recovered}"
            f" after the fault; longest pause in completions within a minute"
            f" {f.longest_pause:.2f} s"
        )
    lines.append(f"HA: the old primary streamed again as synchronous standby after {rejoin:.1f} s")
    return "\n".join(lines)
