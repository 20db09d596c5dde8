"""The Cluster page, the cron-job filter of the executions list, editing a cron job, and the
live feed's cost under load (counted store queries, not timings), on both backends."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from datetime import timedelta
from typing import Any

import pytest

from tests.dashboard.conftest import CSRF, Dash
from tests.dashboard.test_routes import submit
from tests.factories import T0
from tickwheel.dashboard import live
from tickwheel.dashboard.live import Hub
from tickwheel.store.factory import stats_store_for

JOB = {
    "name": "nightly",
    "definitionUri": "registry://jobs/greet",
    "expression": "0 2 * * *",
    "timezone": "Europe/Berlin",
    "inputs": {"name": "A"},
}


async def test_cluster_lists_workers_alive_and_stale(dash: Dash) -> None:
    await dash.store.worker_heartbeat("w-alive", "host-a", 1, 4, 2, T0)
    await dash.store.worker_heartbeat("w-stale", "host-b", 2, 8, 0, T0 - timedelta(seconds=60))
    http, _ = await dash.signed_in()
    async with aclosing(http):
        page = (await http.get("/dashboard/cluster")).text
        assert 'data-worker="w-alive" data-state="alive"' in page
        assert 'data-worker="w-stale" data-state="stale"' in page
        assert "1 alive" in page
        assert "No scheduler holds shard leases" in page
        overview = (await http.get("/dashboard/api/overview")).json()
        assert overview["workersAlive"] == 1


async def test_cluster_shows_schedulers_and_their_shards(dash: Dash) -> None:
    # Leases live on the database's clock (now=None), as the schedulers' own do.
    await dash.store.shard_lease_acquire("sched-a", 600, timedelta(minutes=1))
    await dash.store.shard_lease_acquire("sched-b", 300, timedelta(minutes=1))
    http, _ = await dash.signed_in()
    async with aclosing(http):
        page = (await http.get("/dashboard/cluster")).text
    assert '<tr data-scheduler="sched-a"><td class="mono">sched-a</td><td>600</td>' in page
    assert '<tr data-scheduler="sched-b"><td class="mono">sched-b</td><td>300</td>' in page
    assert '<strong id="unowned-shards">124</strong>' in page


async def test_executions_filter_by_cron_job(dash: Dash) -> None:
    async with dash.api() as api:
        job = (await api.post("/v1/cron-jobs", json=JOB)).json()
    cid = job["cronJobId"]
    mine = await submit(dash, idem=f"cron:{cid}:2026-03-02T01:00:00Z")
    other = cid[:-1] + ("1" if cid.endswith("0") else "0")  # another job's id, one char off
    await submit(dash, idem=f"cron:{other}:2026-03-02T01:00:00Z")
    await submit(dash, idem="cron_%:like-metacharacters")
    async with dash.api() as api:
        r = await api.get("/v1/executions", params={"idempotencyKeyPrefix": f"cron:{cid}:"})
        assert [e["executionId"] for e in r.json()["items"]] == [mine["executionId"]]
        r = await api.get("/v1/executions", params={"idempotencyKeyPrefix": "cron_%"})
        assert [e["idempotencyKey"] for e in r.json()["items"]] == ["cron_%:like-metacharacters"]
    http, _ = await dash.signed_in()
    async with aclosing(http):
        page = (await http.get("/dashboard/executions", params={"cron": cid})).text
        assert mine["executionId"][:8] in page and page.count("/dashboard/executions/") == 1
        jobs = (await http.get("/dashboard/cron-jobs")).text
        assert f"/dashboard/executions?cron={cid}" in jobs
        bad = await http.get("/dashboard/executions", params={"cron": "nope"})
        assert bad.status_code == 400


async def test_edit_a_cron_job_with_its_version(dash: Dash) -> None:
    async with dash.api() as api:
        job = (await api.post("/v1/cron-jobs", json=JOB)).json()
    http, _ = await dash.signed_in()
    async with aclosing(http):
        form = await http.get(f"/dashboard/cron-jobs/{job['cronJobId']}/edit")
        assert form.status_code == 200 and 'value="0 2 * * *"' in form.text
        token = CSRF.search(form.text)
        assert token
        fields: dict[str, Any] = {
            "csrf": token.group(1),
            "version": str(job["version"]),
            "expression": "30 6 * * mon-fri",
            "timezone": "America/New_York",
            "inputs": '{"name": "B"}',
            "misfirePolicy": "skip",
            "overlapPolicy": "forbid",
            "maxCatchUp": "5",
            "jitter": "0",
        }
        r = await http.post(f"/dashboard/cron-jobs/{job['cronJobId']}/edit", data=fields)
        assert r.status_code == 303 and "version" in r.headers["location"], r.text
        async with dash.api() as api:
            now = (await api.get("/v1/cron-jobs/nightly")).json()
        assert now["expression"] == "30 6 * * mon-fri" and now["inputs"] == {"name": "B"}
        assert now["timezone"] == "America/New_York" and now["overlapPolicy"] == "forbid"
        assert now["version"] == job["version"] + 1
        # The same (now stale) version again: refused, nothing changes.
        stale = await http.post(
            f"/dashboard/cron-jobs/{job['cronJobId']}/edit", data={**fields, "jitter": "9"}
        )
        assert stale.status_code == 409 and "changed since you read it" in stale.text
        bad = await http.post(
            f"/dashboard/cron-jobs/{job['cronJobId']}/edit",
            data={**fields, "version": str(now["version"]), "inputs": "{nope"},
        )
        assert bad.status_code == 400 and "inputs: not JSON" in bad.text


async def test_the_feed_makes_one_store_query_per_tick_under_load(
    dash: Dash, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Executions keep arriving and 200 clients listen; every tick still costs exactly one
    counts query (the series and alive count are off here: their own, slower cadence)."""
    monkeypatch.setattr(live, "TICK", 0.01)
    monkeypatch.setattr(live, "SERIES_EVERY", 3600.0)
    calls: list[str] = []
    real = stats_store_for(dash.store)

    class Counting:
        def __getattr__(self, name: str) -> Any:
            method = getattr(real, name)

            async def counted(*args: Any) -> Any:
                calls.append(name)
                return await method(*args)

            return counted

    alive_calls: list[object] = []

    async def alive(since: object) -> int:
        alive_calls.append(since)
        return 0

    feed = Hub(Counting(), dash.clock, alive).feed("acme")  # type: ignore[arg-type]
    feed._series_at = 1e18  # the series and alive count are not due during this test
    boxes = [feed.subscribe() for _ in range(200)]
    seen = 0
    for _ in range(20):
        await asyncio.gather(*(submit(dash) for _ in range(10)))
        snaps = await asyncio.gather(*(b.get(timeout=5.0) for b in boxes))
        assert all(s is not None for s in snaps)
        seen = max(seen, max(s["counts"]["READY"] for s in snaps if s))
    for _ in range(100):  # the tick after the last submission sees all of them
        if seen == 200:
            break
        snap = await boxes[0].get(timeout=5.0)
        seen = snap["counts"]["READY"] if snap else seen
    for box in boxes:
        feed.unsubscribe(box)
    assert feed.task is not None
    await asyncio.wait_for(feed.task, 5.0)
    assert seen == 200
    assert set(calls) == {"stats_status_counts"} and len(calls) == feed.queries
    assert feed.queries >= 20 and alive_calls == []
