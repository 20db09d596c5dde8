"""Example job functions for ``python`` executions: each takes the Execution's inputs as keyword
arguments and returns its outputs as a JSON-able dict."""

from __future__ import annotations


def greet(name: str, times: int = 1) -> dict[str, str]:
    """Greet someone by name (``times`` over, for definitions that declare that input)."""
    return {"greeting": " ".join([f"Hello, {name}!"] * times)}


def add(a: int, b: int) -> dict[str, int]:
    """Add two integers."""
    return {"sum": a + b}
