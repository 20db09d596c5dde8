"""Real processes on a real PostgreSQL: three ``tickwheel orchestrator`` processes, one
``tickwheel scheduler`` and two ``tickwheel worker`` processes run 200 diamond workflow runs
(extract -> clean, stats -> publish, outputs flowing into inputs); one orchestrator is SIGKILLed
half way. Every run ends SUCCEEDED and no task ran as two executions: one execution per
``wf:<run>:<task>`` key, each task run naming its own.

The killed orchestrator's claimed outbox rows come back to the others when its claim expires
(``TICKWHEEL_ORCHESTRATOR_CLAIM_SECONDS``, short here), and whatever it had half done is redone
under the same idempotency keys. TW_WF_PROC_RUNS changes the number of runs."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.acceptance.conftest import free_port
from tests.processes.conftest import TENANT, Cluster, job_doc
from tests.workflows.helpers import DIAMOND, JOB_DOCS
from tickwheel.client.client import AsyncClient
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.domain.definitions import definition_from_document
from tickwheel.store.factory import open_store, workflow_store_for
from tickwheel.workflows.definitions import WorkflowDefinitions
from tickwheel.workflows.runs import WorkflowRuns

RUNS = int(os.environ.get("TW_WF_PROC_RUNS", "200"))
TASKS = ("extract", "clean", "stats", "publish")
JOBS_MODULE = "tw_workflow_jobs"
JOBS_SOURCE = Path(__file__).resolve().parents[1] / "workflows" / "jobs.py"
CLAIM_SECONDS = 3

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]


def diamond_docs() -> list[dict[str, Any]]:
    docs = []
    for name in TASKS:
        inputs, outputs = JOB_DOCS[name]
        doc = job_doc(name, name, inputs=inputs, outputs=outputs, max_attempts=3)
        doc["execution"]["entrypoint"] = f"{JOBS_MODULE}:{name}"
        docs.append(doc)
    return docs


def start_runs(url: str, count: int) -> list[uuid.UUID]:
    """Registers the jobs and the diamond, then starts ``count`` runs through the same code the
    API runs (each start submits the run's root)."""

    async def main() -> list[uuid.UUID]:
        store = await open_store(url, pool_size=4)
        try:
            transport = InProcessTransport(store, TENANT)
            for doc in diamond_docs():
                await transport.apply_definition(definition_from_document(doc))
            workflows = workflow_store_for(store)
            await WorkflowDefinitions(workflows, store, TENANT).apply(DIAMOND, "yaml")
            runs = WorkflowRuns(workflows, AsyncClient(transport=transport), TENANT)
            ids: list[uuid.UUID] = []
            for i in range(count):
                day = f"2026-03-{1 + i % 28:02}"
                wire, created = await runs.start("nightly-report", None, {"day": day}, f"run-{i}")
                assert created
                ids.append(uuid.UUID(wire["workflowRunId"]))
            return ids
        finally:
            await store.close()

    return asyncio.run(main())


def run_counts(cluster: Cluster) -> dict[str, int]:
    rows = cluster.db.rows("SELECT status, count(*) AS n FROM workflow_runs GROUP BY status")
    return {str(r["status"]): int(r["n"]) for r in rows}


def test_three_orchestrators_one_killed_every_diamond_run_completes_once(
    cluster: Cluster,
) -> None:
    shutil.copyfile(JOBS_SOURCE, cluster.jobs_dir / f"{JOBS_MODULE}.py")
    cluster.env["TICKWHEEL_ORCHESTRATOR_CLAIM_SECONDS"] = str(CLAIM_SECONDS)
    cluster.env["TICKWHEEL_WORKFLOW_STALL_SECONDS"] = "5"
    began = time.monotonic()
    ports = [free_port() for _ in range(3)]
    orchestrators = []
    for port in ports:  # each serves its own /metrics (the env is read when it starts)
        cluster.env["TICKWHEEL_METRICS_PORT"] = str(port)
        orchestrators.append(cluster._start("orchestrator", ["orchestrator"]))
    del cluster.env["TICKWHEEL_METRICS_PORT"]
    cluster.scheduler()
    cluster.worker("w1", concurrency=8)
    cluster.worker("w2", concurrency=8)
    # The runs start (each submits its root) while the processes boot: all 200 are in the
    # database before most of the work is done, so the kill below lands in the middle of it.
    ids = start_runs(cluster.url, RUNS)
    started = time.monotonic()

    victim = orchestrators[0]
    owner = f"%-{victim.pid}-%"  # the orchestrator's owner name: host-pid-random

    def mid_way() -> dict[str, int] | None:
        """Kill time: a good share of runs done, and the victim holding outbox rows (or, if
        it is never seen holding any, half of the runs done)."""
        done = run_counts(cluster).get("SUCCEEDED", 0)
        if done < RUNS // 5:
            return None
        [held] = cluster.db.rows(
            "SELECT count(*) AS n FROM workflow_events"
            " WHERE claimed_by LIKE %s AND claim_expires_at > now()",
            (owner,),
        )
        if held["n"] or done >= RUNS // 2:
            return {"succeeded": done, "held": int(held["n"])}
        return None

    at_kill = cluster.eventually(mid_way, 120, f"{RUNS // 5} runs to succeed")
    victim.send(signal.SIGKILL)
    assert victim.popen.wait(timeout=5) == -signal.SIGKILL
    killed_at = time.monotonic()

    def all_done() -> bool:
        return run_counts(cluster) == {"SUCCEEDED": RUNS}

    cluster.eventually(all_done, 120, f"all {RUNS} runs to succeed")
    finished = time.monotonic()
    print(
        f"\n{RUNS} diamond runs started in {started - began:.1f} s, all done "
        f"{finished - began:.1f} s after the processes started; SIGKILL of an orchestrator with "
        f"{at_kill['succeeded']} runs done and {at_kill['held']} outbox rows claimed by it, "
        f"the rest done {finished - killed_at:.1f} s later"
    )
    for proc in orchestrators[1:]:
        assert proc.alive(), proc.output()
    print(
        "CPU seconds: " + ", ".join(f"{p.name} {cpu_seconds(p.pid):.1f}" for p in cluster.procs[1:])
    )

    # Exactly one execution per task key, each SUCCEEDED, and none outside the runs' keys.
    executions = cluster.db.rows("SELECT idempotency_key, execution_id, status FROM executions")
    by_key: dict[str, list[Any]] = {}
    for row in executions:
        by_key.setdefault(str(row["idempotency_key"]), []).append(row)
    expected = {f"wf:{run_id}:{task}" for run_id in ids for task in TASKS}
    assert set(by_key) == expected
    assert [k for k, rows in by_key.items() if len(rows) != 1] == []
    assert {row["status"] for row in executions} == {"SUCCEEDED"}

    # Each task run names its key's execution, and no execution serves two task runs.
    tasks = cluster.db.rows(
        "SELECT workflow_run_id, task_name, status, execution_id, output FROM workflow_task_runs"
    )
    assert len(tasks) == RUNS * len(TASKS)
    assert {t["status"] for t in tasks} == {"SUCCEEDED"}
    assert len({t["execution_id"] for t in tasks}) == len(tasks)
    for t in tasks:
        [row] = by_key[f"wf:{t['workflow_run_id']}:{t['task_name']}"]
        assert row["execution_id"] == t["execution_id"]

    # Outputs flowed into inputs: each publish saw its own extract's rows through clean and stats.
    days = {
        r["workflow_run_id"]: r["inputs"]["day"]
        for r in cluster.db.rows("SELECT workflow_run_id, inputs FROM workflow_runs")
    }
    for t in tasks:
        if t["task_name"] == "publish":
            day = days[t["workflow_run_id"]]
            assert t["output"] == {"published": f"s3://clean/3+s3://stats/{day}-a"}

    # Nothing is left in the outbox: the killed orchestrator's claimed rows were taken over.
    # Taken over once their claim lapses (CLAIM_SECONDS after the victim took them), and the
    # runs may all be done sooner: 0.9 s after the kill in one clean run, with a row still held.
    def outbox_empty() -> bool:
        return cluster.db.rows("SELECT count(*) AS n FROM workflow_events")[0]["n"] == 0

    cluster.eventually(outbox_empty, CLAIM_SECONDS + 30, "the outbox to be emptied")

    # Each outbox row was consumed (deleted) by exactly one orchestrator, which counted it: the
    # survivors' /metrics account for all of them but those the victim consumed before dying.
    consumed = [scrape(port, "tickwheel_workflow_events_total") for port in ports[1:]]
    assert all(n > 0 for n in consumed), consumed
    assert sum(consumed) <= RUNS * len(TASKS)
    print(f"outbox rows consumed by the two survivors: {consumed} of {RUNS * len(TASKS)}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (Linux), to see where the time of the test goes."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scrape(port: int, name: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    [value] = [line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")]
    return float(value)
