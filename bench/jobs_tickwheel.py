"""The no-op job of the tickwheel benchmarks (entrypoint ``bench.jobs_tickwheel:noop``)."""

from __future__ import annotations

from typing import Any

from bench.journal import record


async def noop(context: Any) -> dict[str, object]:
    record(str(context.execution_id))
    return {}
