"""Job functions for the workflow tests (entrypoints ``tests.workflows.jobs:<name>``)."""

from __future__ import annotations

import asyncio
from typing import Any

FAIL: set[str] = set()
"""Tasks (by the ``name`` input of ``step``) that fail while listed here."""
GATE: list[asyncio.Event] = []
"""``gate`` waits for the event a test put here (made in the test's own event loop)."""


def extract(day: str) -> dict[str, Any]:
    return {"rows": [f"{day}-a", f"{day}-b", f"{day}-c"]}


def clean(rows: list[str]) -> dict[str, Any]:
    return {"uri": f"s3://clean/{len(rows)}"}


def stats(rows: list[str]) -> dict[str, Any]:
    return {"uri": f"s3://stats/{rows[0]}"}


def publish(clean: str, stats: str) -> dict[str, Any]:
    return {"published": f"{clean}+{stats}"}


def step(name: str) -> dict[str, Any]:
    if name in FAIL:
        raise ValueError(f"step {name} fails")
    return {"done": name}


def seed() -> dict[str, Any]:
    return {"base": 1000}


def part(base: int, index: int) -> dict[str, Any]:
    return {"value": base + index}


def gather(values: list[int]) -> dict[str, Any]:
    return {"total": sum(values), "count": len(values)}


async def gate(name: str) -> dict[str, Any]:
    """Runs until the test opens its gate: a task that is RUNNING for as long as a test needs."""
    await GATE[-1].wait()
    return {"done": name}
