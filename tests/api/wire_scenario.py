"""One scripted session that calls every route of the API, for the wire-format replay test.

The session runs on a fresh SQLite store with a fake clock that moves one second per request,
API keys whose ids and secrets are fixed, and UUIDv7 ids whose random bits come from a seeded
generator: run twice, it gives the same bytes. Its answers were recorded (``recorded/*.json``,
one file per route module) before the routes got typed response models, so the replay proves
that the models changed nothing on the wire.

Normalisation rule: none is needed for ids, times, cursors or hashes (all are deterministic
under the rig above). The only volatile answer is ``/metrics`` (Prometheus text with process
timings): only its status is recorded. Every other body is kept as the exact JSON text the server
sent (compact, key order as sent), and compared as text.

Re-record (only when a change of the wire format is intended):
``python -m tests.api.wire_scenario``.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx

from tests.factories import T0, definition_doc, stored
from tests.workflows.helpers import DIAMOND, JOB_DOCS, job_doc
from tickwheel.api.app import create_app
from tickwheel.api.auth import hash_key
from tickwheel.config import Settings
from tickwheel.domain import ids
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.definitions import definition_from_document
from tickwheel.domain.models import ApiKey, Scope
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.store.factory import open_store
from tickwheel.store.protocol import AttemptResult, Store

RECORDED = Path(__file__).with_name("recorded")
KEYS = {
    "admin": ("acme", Scope.ADMIN),
    "operator": ("acme", Scope.OPERATOR),
    "read": ("acme", Scope.READ),
    "other": ("globex", Scope.ADMIN),
}


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer tw_{name}key_fixed-secret-of-{name}"}


@dataclass
class Recorder:
    http: httpx.AsyncClient
    clock: FakeClock
    store: Store
    exchanges: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    async def call(
        self, module: str, method: str, path: str, *, key: str | None = "admin", **kw: Any
    ) -> Any:
        """One request, recorded under ``module``; returns the decoded body."""
        self.clock.advance(1)
        headers = {**(auth(key) if key else {}), **kw.pop("headers", {})}
        r = await self.http.request(method, path, headers=headers, **kw)
        entry: dict[str, Any] = {"request": f"{method} {r.request.url.raw_path.decode()}"}
        entry["status"] = r.status_code
        if module != "metrics":
            entry["body"] = r.text
        self.exchanges.setdefault(module, []).append(entry)
        return r.json() if module != "metrics" else r.text


@contextmanager
def fixed_ids(seed: int = 15) -> Iterator[None]:
    """UUIDv7 random bits from a seeded generator, and the process's last id forgotten (an
    earlier test with the system clock would otherwise stamp our ids with its milliseconds)."""
    names = vars(ids)
    saved = {k: names[k] for k in ("os", "_last_ms", "_last_rand")}
    rng = random.Random(seed)
    names.update(os=SimpleNamespace(urandom=rng.randbytes), _last_ms=0, _last_rand=0)
    try:
        yield
    finally:
        names.update(saved)


@asynccontextmanager
async def rig(sqlite_file: Path) -> AsyncIterator[Recorder]:
    store = await open_store(f"sqlite:///{sqlite_file}")
    try:
        await store.migrate()
        clock = FakeClock(T0)
        for name, (tenant, scope) in KEYS.items():
            key = ApiKey(f"{name}key", tenant, scope, name, T0)
            await store.api_key_insert(key, hash_key(auth(name)["Authorization"][7:]))
        settings = Settings(max_body_bytes=64 * 1024, _env_file=None)  # type: ignore[call-arg]
        app = create_app(store, settings, clock)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            yield Recorder(http, clock, store)
    finally:
        await store.close()


async def definitions(rec: Recorder) -> None:
    m = "definitions"
    await rec.call(m, "PUT", "/v1/definitions", json=definition_doc())
    await rec.call(m, "PUT", "/v1/definitions", json=definition_doc())
    await rec.call(m, "PUT", "/v1/definitions", json=definition_doc(version=2, timeout=60))
    await rec.call(m, "PUT", "/v1/definitions", json={"name": "broken"})
    await rec.call(m, "PUT", "/v1/definitions", json=definition_doc(), key="read")
    await rec.call(m, "PUT", "/v1/definitions", params={"shared": "true"}, json=definition_doc())
    await rec.call(m, "GET", "/v1/definitions")
    await rec.call(m, "GET", "/v1/definitions/greet")
    await rec.call(m, "GET", "/v1/definitions/greet/versions/2")
    await rec.call(m, "GET", "/v1/definitions/greet/versions/9")
    await rec.call(m, "GET", "/v1/definitions/greet", key="other")
    for name in JOB_DOCS:
        await rec.store.definition_insert(stored(definition_from_document(job_doc(name)), T0))


async def executions(rec: Recorder) -> None:
    m = "executions"
    body = {"definitionUri": "registry://jobs/greet", "inputs": {"name": "Ada"}}
    key = {"Idempotency-Key": "k1"}
    first = await rec.call(m, "POST", "/v1/executions", json=body, headers=key)
    await rec.call(m, "POST", "/v1/executions", json=body, headers=key)
    await rec.call(m, "POST", "/v1/executions", json={**body, "priority": 3}, headers=key)
    await rec.call(m, "POST", "/v1/executions", json={**body, "inputs": {"name": 1}})
    await rec.call(m, "POST", "/v1/executions", json={**body, "bogus": 1})
    await rec.call(m, "POST", "/v1/executions", content=b"{nope", headers=key)
    await rec.call(m, "POST", "/v1/executions", json=body, key=None)
    await rec.call(m, "POST", "/v1/executions", json=body, key="read")
    later = {**body, "executeAt": "2026-03-02T09:00:00+01:00", "priority": 5}
    second = await rec.call(m, "POST", "/v1/executions", json=later)
    items = [
        {**body, "idempotencyKey": "b1"},
        {**body, "idempotencyKey": "k1", "priority": 9},
        {**body, "definitionUri": "registry://jobs/nope"},
        {**body, "idempotencyKey": "k1"},
    ]
    await rec.call(m, "POST", "/v1/executions/batch", json={"items": items})
    page = await rec.call(m, "GET", "/v1/executions", params={"limit": 2})
    await rec.call(m, "GET", "/v1/executions", params={"limit": 2, "cursor": page["nextCursor"]})
    await rec.call(m, "GET", "/v1/executions", params={"status": "READY,scheduled"})
    await rec.call(m, "GET", "/v1/executions", params={"status": "NOPE"})
    await rec.call(m, "GET", "/v1/executions", params={"cursor": "nonsense"})
    await rec.call(m, "GET", "/v1/executions", params={"idempotencyKeyPrefix": "k"})
    path = f"/v1/executions/{first['executionId']}"
    await rec.call(m, "GET", path)
    await rec.call(m, "GET", path, key="other")
    await rec.call(m, "GET", "/v1/executions/not-a-uuid")
    await rec.call(m, "DELETE", f"/v1/executions/{second['executionId']}")
    await rec.call(m, "DELETE", f"/v1/executions/{second['executionId']}")
    await rec.call(m, "GET", f"/v1/executions/{second['executionId']}/history")
    await rec.call(m, "POST", path + "/replay")
    # One worker's attempt fails the execution for good; a replay brings it back.
    [claimed] = await rec.store.execution_claim_ready(
        "w1", 1, timedelta(seconds=30), rec.clock.now()
    )
    assert claimed.fencing_token is not None
    await rec.call(m, "GET", path + "/attempts")
    await rec.call(m, "DELETE", path)
    failed = AttemptResult(
        claimed.execution_id,
        claimed.fencing_token,
        AttemptStatus.FAILED,
        ExecutionStatus.FAILED,
        output={"partial": [1, 2]},
        error={"kind": "permanent", "message": "bad input file"},
    )
    await rec.store.attempt_finish(failed, rec.clock.now())
    await rec.call(m, "GET", path + "/output")
    await rec.call(m, "POST", path + "/replay")
    await rec.call(m, "GET", path + "/history")
    await rec.call(m, "GET", path + "/attempts")
    await rec.call(m, "GET", path)


CRON_JOB = {
    "name": "nightly",
    "definitionUri": "registry://jobs/greet",
    "expression": "0 2 * * *",
    "timezone": "Europe/Berlin",
    "inputs": {"name": "Ada"},
}


async def cron(rec: Recorder) -> None:
    m = "cron"
    job = await rec.call(m, "POST", "/v1/cron-jobs", json=CRON_JOB)
    await rec.call(m, "POST", "/v1/cron-jobs", json=CRON_JOB)
    await rec.call(m, "POST", "/v1/cron-jobs", json={**CRON_JOB, "expression": "0 3 * * *"})
    await rec.call(m, "POST", "/v1/cron-jobs", json={**CRON_JOB, "name": "x", "timezone": "Mars"})
    minutely = {
        "name": "minutely",
        "workflow": {"name": "nightly-report"},
        "expression": "* * * * *",
        "inputs": {"day": "2026-03-01"},
        "overlapPolicy": "forbid",
        "dstPolicy": {"nonexistent": "skip", "ambiguous": "both"},
        "jitter": 0,
        "endAt": "2027-01-01T00:00:00Z",
    }
    await rec.call(m, "POST", "/v1/cron-jobs", json=minutely)
    page = await rec.call(m, "GET", "/v1/cron-jobs", params={"limit": 1})
    await rec.call(m, "GET", "/v1/cron-jobs", params={"limit": 1, "cursor": page["nextCursor"]})
    await rec.call(m, "GET", "/v1/cron-jobs/nightly")
    await rec.call(m, "GET", f"/v1/cron-jobs/{job['cronJobId']}")
    await rec.call(m, "GET", "/v1/cron-jobs/nope")
    patch = {"version": job["version"], "expression": "30 1 * * *", "maxCatchUp": 2}
    await rec.call(m, "PATCH", "/v1/cron-jobs/nightly", json=patch)
    await rec.call(m, "PATCH", "/v1/cron-jobs/nightly", json=patch)
    await rec.call(m, "POST", "/v1/cron-jobs/nightly/pause")
    await rec.call(m, "POST", "/v1/cron-jobs/nightly/resume", json={"catchUp": True})
    await rec.call(m, "POST", "/v1/cron-jobs/nightly/resume")
    await rec.call(m, "GET", "/v1/cron-jobs/nightly/audit")
    docs = [
        {**CRON_JOB, "name": "nightly", "expression": "30 1 * * *", "maxCatchUp": 2},
        {**CRON_JOB, "name": "hourly", "expression": "0 * * * *"},
    ]
    apply = {"cronJobs": docs, "dryRun": True}
    await rec.call(m, "POST", "/v1/cron-jobs/apply", json=apply)
    apply = {"cronJobs": docs, "prune": True, "label": "ops"}
    await rec.call(m, "POST", "/v1/cron-jobs/apply", json=apply, headers={"Idempotency-Key": "a1"})
    await rec.call(m, "POST", "/v1/cron-jobs/apply", json=apply, headers={"Idempotency-Key": "a1"})
    await rec.call(m, "POST", "/v1/cron-jobs/apply", json={"cronJobs": [{"name": 1}]})
    query = {"expression": "30 2 * * *", "timezone": "Europe/Berlin", "count": 3}
    await rec.call(m, "GET", "/v1/cron/preview", params={**query, "from": "2026-03-28T00:00:00Z"})
    await rec.call(m, "GET", "/v1/cron/preview", params={**query, "nonexistent": "skip"})
    await rec.call(m, "GET", "/v1/cron/preview", params={"expression": "61 * * * *"})
    await rec.call(m, "GET", "/v1/cron-jobs/minutely/executions")
    await rec.call(m, "DELETE", "/v1/cron-jobs/hourly", params={"version": 7})
    await rec.call(m, "DELETE", "/v1/cron-jobs/hourly")


async def cron_manual(rec: Recorder) -> None:
    m = "cron_manual"
    await rec.call(m, "POST", "/v1/cron-jobs/nightly/trigger", json={"key": "deploy-1"})
    await rec.call(m, "POST", "/v1/cron-jobs/nightly/trigger", json={"key": "deploy-1"})
    await rec.call(m, "POST", "/v1/cron-jobs/minutely/trigger")
    await rec.call(m, "POST", "/v1/cron-jobs/nope/trigger")
    rec.clock.advance(600)
    now = rec.clock.now()
    window = {"from": (now - timedelta(minutes=5)).isoformat(), "to": now.isoformat()}
    await rec.call(m, "POST", "/v1/cron-jobs/nightly/backfill", json=window)
    hours = {"from": (now - timedelta(hours=30)).isoformat(), "to": now.isoformat()}
    await rec.call(m, "POST", "/v1/cron-jobs/nightly/backfill", json=hours)
    await rec.call(m, "POST", "/v1/cron-jobs/nightly/backfill", json=hours)
    await rec.call(m, "POST", "/v1/cron-jobs/nightly/backfill", json={"from": "x", "to": "y"})
    await rec.call(m, "GET", "/v1/cron-jobs/nightly/executions", params={"limit": 2})
    await rec.call(m, "GET", "/v1/cron-jobs/minutely/executions")


async def workflows(rec: Recorder) -> None:
    m = "workflows"
    yaml_type = {"Content-Type": "application/yaml"}
    await rec.call(m, "PUT", "/v1/workflows", content=DIAMOND, headers=yaml_type)
    await rec.call(m, "PUT", "/v1/workflows", content=DIAMOND, headers=yaml_type)
    changed = DIAMOND.replace("version: 1", "version: 2")
    await rec.call(m, "PUT", "/v1/workflows", content=changed, headers=yaml_type)
    await rec.call(m, "PUT", "/v1/workflows", content=b"name: bad\ntasks: []", headers=yaml_type)
    await rec.call(m, "GET", "/v1/workflows")
    await rec.call(m, "GET", "/v1/workflows/nightly-report")
    await rec.call(m, "GET", "/v1/workflows/nightly-report", params={"version": 1})
    await rec.call(m, "GET", "/v1/workflows/nope")
    body = {"workflow": "nightly-report", "inputs": {"day": "2026-03-01"}}
    key = {"Idempotency-Key": "r1"}
    run = await rec.call(m, "POST", "/v1/workflow-runs", json=body, headers=key)
    await rec.call(m, "POST", "/v1/workflow-runs", json=body, headers=key)
    await rec.call(m, "POST", "/v1/workflow-runs", json={**body, "version": 1}, headers=key)
    await rec.call(m, "POST", "/v1/workflow-runs", json={**body, "inputs": {}})
    path = f"/v1/workflow-runs/{run['workflowRunId']}"
    await rec.call(m, "GET", path)
    await rec.call(m, "POST", path + "/retry")
    await rec.call(m, "DELETE", path)
    await rec.call(m, "DELETE", path)
    await rec.call(m, "POST", path + "/retry")
    await rec.call(m, "GET", path, key="other")


async def health(rec: Recorder) -> None:
    await rec.call("health", "GET", "/healthz", key=None)
    await rec.call("health", "GET", "/readyz", key=None)
    await rec.call("health", "GET", "/v1/nowhere")
    await rec.call("health", "POST", "/healthz", key=None)
    await rec.call("metrics", "GET", "/metrics", key=None)


async def run_session(sqlite_template: Path) -> dict[str, list[dict[str, Any]]]:
    """Every route, in an order where later calls use what earlier ones made."""
    with tempfile.TemporaryDirectory() as tmp, fixed_ids():
        path = Path(tmp) / "wire.db"
        shutil.copyfile(sqlite_template, path)
        async with rig(path) as rec:
            for part in (definitions, executions, workflows, cron, cron_manual, health):
                await part(rec)
            return rec.exchanges


def dump(exchanges: list[dict[str, Any]]) -> str:
    return json.dumps(exchanges, indent=1, ensure_ascii=False) + "\n"


async def _record() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "template.db"
        store = await open_store(f"sqlite:///{template}")
        await store.migrate()
        await store.close()
        first = await run_session(template)
        again = await run_session(template)
        if first != again:
            sys.exit("the session is not deterministic: two runs differ; nothing recorded")
    RECORDED.mkdir(exist_ok=True)
    for module, exchanges in first.items():
        (RECORDED / f"{module}.json").write_text(dump(exchanges))
        print(f"{module}: {len(exchanges)} exchanges")


if __name__ == "__main__":
    asyncio.run(_record())
