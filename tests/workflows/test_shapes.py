"""Graph shapes end to end on both backends: a linear chain passing outputs along, a fan-out of
100 tasks into one fan-in task, and a cancel while a task is running. Task runs are listed in
the workflow's order however their rows were updated (PostgreSQL moves updated rows)."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import yaml

from tests.workflows import jobs
from tests.workflows.helpers import WorkflowRig, chain
from tickwheel.engine.worker import Worker
from tickwheel.services.settings import WorkerSettings

FAN = 100


def statuses(run: dict[str, Any]) -> dict[str, str]:
    return {t["name"]: t["status"] for t in run["tasks"]}


async def test_a_linear_chain_passes_each_output_to_the_next_task(rig: WorkflowRig) -> None:
    names = ["a", "b", "c", "d", "e"]
    tasks: list[dict[str, Any]] = [{"name": "a"}]
    for before, name in itertools.pairwise(names):
        tasks.append(
            {
                "name": name,
                "dependsOn": [before],
                "inputs": {"name": f"${{{{ tasks.{before}.outputs.done }}}}>{name}"},
            }
        )
    await rig.apply(chain(*tasks))
    run_id = await rig.start("chain")
    await rig.settle()
    run = await rig.get(run_id)
    assert run["status"] == "SUCCEEDED"
    assert [t["name"] for t in run["tasks"]] == names
    assert [t["output"]["done"] for t in run["tasks"]] == [
        "a",
        "a>b",
        "a>b>c",
        "a>b>c>d",
        "a>b>c>d>e",
    ]
    # Each task's input was its upstream's output: none could run before the one above it.
    executions = await rig.executions()
    assert sorted(executions) == sorted(f"wf:{run_id}:{n}" for n in names)
    assert executions[f"wf:{run_id}:e"].inputs == {"name": "a>b>c>d>e"}


def fan_workflow() -> str:
    parts = [f"part-{i:03}" for i in range(FAN)]
    tasks: list[dict[str, Any]] = [{"name": "seed", "definition": "registry://jobs/seed"}]
    tasks += [
        {
            "name": name,
            "definition": "registry://jobs/part",
            "dependsOn": ["seed"],
            "inputs": {"base": "${{ tasks.seed.outputs.base }}", "index": i},
        }
        for i, name in enumerate(parts)
    ]
    tasks.append(
        {
            "name": "gather",
            "definition": "registry://jobs/gather",
            # Listed in reverse: the fan-in's dependsOn order is not the fan-out's.
            "dependsOn": list(reversed(parts)),
            "inputs": {"values": [f"${{{{ tasks.{p}.outputs.value }}}}" for p in parts]},
        }
    )
    return yaml.safe_dump({"name": "fan", "version": 1, "tasks": tasks})


async def test_a_fan_out_of_100_tasks_flows_into_one_fan_in(rig: WorkflowRig) -> None:
    await rig.apply(fan_workflow())
    rig.worker = Worker(
        rig.store, rig.clock, worker_id="w1", settings=WorkerSettings(concurrency=25)
    )
    run_id = await rig.start("fan")

    async def one_round() -> dict[str, int]:
        await rig.scheduler.run_once()
        await rig.worker.run_once()
        await rig.worker.drain()
        await rig.orchestrator.run_once()
        counts: dict[str, int] = {}
        for status in statuses(await rig.get(run_id)).values():
            counts[status] = counts.get(status, 0) + 1
        return counts

    # The seed ran: the hundred were submitted at once, the fan-in waits.
    assert await one_round() == {"SUCCEEDED": 1, "SUBMITTED": FAN, "PENDING": 1}
    # A quarter of them ran: the fan-in still waits for the rest.
    assert await one_round() == {"SUCCEEDED": 26, "SUBMITTED": FAN - 25, "PENDING": 1}
    await rig.settle(rounds=200)
    run = await rig.get(run_id)
    assert run["status"] == "SUCCEEDED", statuses(run)
    names = [t["name"] for t in run["tasks"]]
    assert names == ["seed", *(f"part-{i:03}" for i in range(FAN)), "gather"]
    assert set(statuses(run).values()) == {"SUCCEEDED"}
    gather = run["tasks"][-1]
    assert gather["output"] == {"total": sum(1000 + i for i in range(FAN)), "count": FAN}
    executions = await rig.executions()
    assert len(executions) == FAN + 2
    gathered = executions[f"wf:{run_id}:gather"]
    assert gathered.inputs == {"values": [1000 + i for i in range(FAN)]}


async def test_a_failed_part_of_the_fan_out_skips_the_fan_in(rig: WorkflowRig) -> None:
    tasks: list[dict[str, Any]] = [{"name": "root"}]
    tasks += [{"name": f"p{i}", "dependsOn": ["root"]} for i in range(10)]
    tasks.append({"name": "join", "dependsOn": [f"p{i}" for i in range(10)]})
    tasks.append({"name": "report", "dependsOn": ["join"], "triggerRule": "all_done"})
    await rig.apply(chain(*tasks))
    jobs.FAIL.add("p7")
    run_id = await rig.start("chain")
    await rig.settle(rounds=100)
    run = await rig.get(run_id)
    got = statuses(run)
    assert got.pop("p7") == "FAILED"
    assert (got.pop("join"), got.pop("report")) == ("SKIPPED", "SUCCEEDED")
    assert set(got.values()) == {"SUCCEEDED"}
    assert run["status"] == "FAILED"
    assert f"wf:{run_id}:join" not in await rig.executions()


async def test_cancel_mid_run_leaves_the_running_task_to_finish_and_starts_nothing_new(
    rig: WorkflowRig,
) -> None:
    # a -> b (gate, will be running) -> c ; a -> e (READY, not claimed when we cancel)
    await rig.apply(
        chain(
            {"name": "a"},
            {"name": "b", "dependsOn": ["a"], "definition": "registry://jobs/gate"},
            {"name": "e", "dependsOn": ["a"]},
            {"name": "c", "dependsOn": ["b"]},
        )
    )
    jobs.GATE.append(asyncio.Event())
    run_id = await rig.start("chain")
    await rig.scheduler.run_once()
    assert await rig.worker.run_once() == 1  # a
    await rig.worker.drain()
    assert await rig.orchestrator.run_once() == 1
    assert statuses(await rig.get(run_id)) == {
        "a": "SUCCEEDED",
        "b": "SUBMITTED",
        "e": "SUBMITTED",
        "c": "PENDING",
    }
    # A worker that runs gate jobs only takes b, which runs until the gate opens.
    gates = Worker(rig.store, rig.clock, worker_id="w2", definition_uris=["registry://jobs/gate"])
    assert await gates.run_once() == 1
    executions = await rig.executions()
    assert executions[f"wf:{run_id}:b"].status == "RUNNING"

    cancelled = await rig.runs.cancel(run_id)
    assert cancelled["status"] == "CANCELLED"
    assert statuses(cancelled) == {
        "a": "SUCCEEDED",
        "b": "SUBMITTED",  # running: it finishes on its own
        "e": "CANCELLED",  # READY: its execution was cancelled
        "c": "CANCELLED",  # never submitted
    }
    assert (await rig.executions())[f"wf:{run_id}:e"].status == "CANCELLED"

    jobs.GATE[-1].set()
    await gates.drain()
    await rig.settle()
    run = await rig.get(run_id)
    assert run["status"] == "CANCELLED"
    assert statuses(run) == {"a": "SUCCEEDED", "b": "SUCCEEDED", "e": "CANCELLED", "c": "CANCELLED"}
    assert run["tasks"][1]["output"] == {"done": "b"}
    assert sorted(await rig.executions()) == sorted(f"wf:{run_id}:{n}" for n in ("a", "b", "e"))


async def test_task_runs_are_listed_in_definition_order_after_updates(rig: WorkflowRig) -> None:
    order = ["zeta", "alpha", "mid", "beta"]
    await rig.apply(
        chain(
            {"name": "zeta"},
            {"name": "alpha", "dependsOn": ["zeta"]},
            {"name": "mid"},
            {"name": "beta", "dependsOn": ["alpha", "mid"]},
        )
    )
    run_id = await rig.start("chain")
    await rig.settle()
    listed = await rig.workflows.workflow_task_run_list(run_id)
    assert [t.task_name for t in listed] == order
    assert [t.position for t in listed] == [0, 1, 2, 3]
    assert [t.depends_on for t in listed] == [(), ("zeta",), (), ("alpha", "mid")]
    assert [t["name"] for t in (await rig.get(run_id))["tasks"]] == order
