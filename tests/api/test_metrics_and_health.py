"""``/metrics`` and ``/readyz``, both without authentication, on both backends."""

from __future__ import annotations

import re
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from tests.api.conftest import Api
from tests.factories import new_execution
from tickwheel.store.sqlite.store import SqliteStore

NO_AUTH = {"Authorization": ""}


_LINE = re.compile(r"^(\w+)(?:\{(.*)\})? (\S+)$")


def _sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one series in Prometheus text (labels in any order), or None."""
    for line in text.splitlines():
        match = _LINE.match(line)
        if match and match[1] == name and dict(_LABEL.findall(match[2] or "")) == labels:
            return float(match[3])
    return None


_LABEL = re.compile(r'(\w+)="([^"]*)"')


async def test_metrics_are_prometheus_text_without_auth(api: Api) -> None:
    await api.store.execution_insert_many(
        [new_execution(now=api.clock.now()), new_execution(execute_in=60, now=api.clock.now())]
    )
    missing = f"/v1/executions/{uuid.uuid4()}"
    assert (await api.http.get("/healthz", headers=NO_AUTH)).status_code == 200
    assert (await api.http.get(missing)).status_code == 404
    assert (await api.http.get("/no/such/page")).status_code == 404

    r = await api.http.get("/metrics", headers=NO_AUTH)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = r.text
    assert _sample(text, "tickwheel_queue_depth", status="READY") == 1
    assert _sample(text, "tickwheel_queue_depth", status="SCHEDULED") == 1
    assert _sample(text, "tickwheel_queue_depth", status="RUNNING") == 0
    assert _sample(text, "tickwheel_executions_finished_recently", status="FAILED") == 0
    assert _sample(text, "tickwheel_executions_finished_window_seconds") == 300
    http = "tickwheel_http_request_duration_seconds_count"
    # Routes by template, never by raw path; unmatched paths share one series.
    assert _sample(text, http, method="GET", route="/healthz", status="200")
    route = "/v1/executions/{execution_id}"
    assert _sample(text, http, method="GET", route=route, status="404")
    assert _sample(text, http, method="GET", route="<unmatched>", status="404")
    assert missing not in text
    for family in (
        "tickwheel_executions_submitted_total",
        "tickwheel_scheduling_lateness_seconds",
        "tickwheel_attempt_duration_seconds",
        "tickwheel_lease_expirations_total",
        "tickwheel_stale_fencing_token_rejections_total",
        "tickwheel_cron_occurrences_total",
    ):
        assert f"# TYPE {family} " in text, family


_FORGET = {
    "sqlite": (
        "SELECT version, name, checksum, applied_at FROM tickwheel_migrations"
        " ORDER BY version DESC LIMIT 1",
        "DELETE FROM tickwheel_migrations WHERE version = ?",
        "INSERT INTO tickwheel_migrations VALUES (?, ?, ?, ?)",
    ),
    "postgres": (
        "SELECT version, name, checksum, applied_at FROM tickwheel_migrations"
        " ORDER BY version DESC LIMIT 1",
        "DELETE FROM tickwheel_migrations WHERE version = %s",
        "INSERT INTO tickwheel_migrations VALUES (%s, %s, %s, %s)",
    ),
}


@contextmanager
def _last_migration_forgotten(api: Api, request: pytest.FixtureRequest) -> Iterator[str]:
    """Makes the database look one migration behind (its record removed), then restores it."""
    conn: sqlite3.Connection | psycopg.Connection[tuple[object, ...]]
    if isinstance(api.store, SqliteStore):
        conn, (select, delete, insert) = (
            sqlite3.connect(api.store.path, isolation_level=None),
            _FORGET["sqlite"],
        )
    else:
        url = request.getfixturevalue("pg_url")
        conn, (select, delete, insert) = psycopg.connect(url, autocommit=True), _FORGET["postgres"]
    try:
        row = conn.execute(select).fetchone()
        assert row is not None
        conn.execute(delete, (row[0],))
        try:
            yield f"{int(str(row[0])):04d}_{row[1]}"
        finally:
            conn.execute(insert, row)
    finally:
        conn.close()


async def test_readyz_is_503_while_migrations_are_pending(
    api: Api, request: pytest.FixtureRequest
) -> None:
    assert (await api.http.get("/readyz", headers=NO_AUTH)).status_code == 200
    with _last_migration_forgotten(api, request) as label:
        r = await api.http.get("/readyz", headers=NO_AUTH)
        assert r.status_code == 503
        assert r.json() == {"status": "unavailable", "pendingMigrations": [label]}
    assert (await api.http.get("/readyz", headers=NO_AUTH)).json()["status"] == "ok"


async def test_readyz_is_503_when_the_database_is_gone(api: Api) -> None:
    await api.store.close()
    r = await api.http.get("/readyz", headers=NO_AUTH)
    assert r.status_code == 503 and r.json()["status"] == "unavailable"


def test_a_process_without_the_api_serves_its_own_metrics() -> None:
    import socket

    import httpx

    from tickwheel.observability.metrics import process_metrics, serve_metrics

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process_metrics().stale_fencing.inc()
    stop = serve_metrics(port)
    try:
        body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    finally:
        stop()
    assert "tickwheel_stale_fencing_token_rejections_total" in body
