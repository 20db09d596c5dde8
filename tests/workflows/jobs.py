"""Job functions for the workflow tests (entrypoints ``tests.workflows.jobs:<name>``)."""

from __future__ import annotations

from typing import Any

FAIL: set[str] = set()
"""Tasks (by the ``name`` input of ``step``) that fail while listed here."""


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
