"""Example job functions for ``python`` executions: each takes the Execution's inputs as keyword
arguments and returns its outputs as a JSON-able dict."""

from __future__ import annotations


def greet(name: str, times: int = 1) -> dict[str, str]:
    """Greet someone by name (``times`` over, for definitions that declare that input)."""
    return {"greeting": " ".join([f"Hello, {name}!"] * times)}


def add(a: int, b: int) -> dict[str, int]:
    """Add two integers."""
    return {"sum": a + b}


# The nightly-report workflow's tasks (examples/workflows/nightly-report.yaml): a diamond.


def extract(day: str) -> dict[str, list[str]]:
    """The day's rows."""
    return {"rows": [f"{day} order {i}" for i in range(1, 4)]}


def clean(rows: list[str]) -> dict[str, str]:
    return {"uri": f"file:///tmp/clean-{len(rows)}.json"}


def stats(rows: list[str]) -> dict[str, str]:
    return {"uri": f"file:///tmp/stats-{len(rows)}.json"}


def publish(clean: str, stats: str) -> dict[str, str]:
    return {"message": f"published {clean} and {stats}"}
