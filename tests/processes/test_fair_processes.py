"""Fairness between two tenants with real worker processes on one PostgreSQL: while tenant
``acme`` has thousands of READY executions, another tenant's single execution is claimed at the
next claim, not after the backlog it was submitted behind (claim order is priority, then
readiness, so without the fair claim it would start last)."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from tests.processes.conftest import Cluster, job_doc
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.domain.definitions import definition_from_document
from tickwheel.domain.submission import SubmitRequest
from tickwheel.store.factory import open_store

pytestmark = pytest.mark.postgres

BACKLOG = 1_000
CONCURRENCY = 8
DOC = job_doc(
    "nap", "slow", inputs={"seconds": "number"}, outputs={"pid": "integer", "token": "integer"}
)


def as_tenant(url: str, tenant: str, requests: list[SubmitRequest]) -> list[uuid.UUID]:
    """Applies the definition as ``tenant`` (a tenant sees its own definitions) when there is
    nothing to submit, or submits."""

    async def main() -> list[uuid.UUID]:
        store = await open_store(url, pool_size=2)
        try:
            transport = InProcessTransport(store, tenant)
            if not requests:
                await transport.apply_definition(definition_from_document(DOC))
                return []
            items = await transport.submit_many(requests)
            assert all(item["status"] == 201 for item in items), items[:3]
            return [uuid.UUID(str(item["execution"]["executionId"])) for item in items]
        finally:
            await store.close()

    return asyncio.run(main())


def test_another_tenants_one_execution_is_not_queued_behind_a_backlog(cluster: Cluster) -> None:
    backlog = [SubmitRequest("registry://jobs/nap", {"seconds": 0.04}) for _ in range(BACKLOG)]
    as_tenant(cluster.url, "acme", [])
    as_tenant(cluster.url, "other", [])
    as_tenant(cluster.url, "acme", backlog)
    cluster.worker("w1", concurrency=CONCURRENCY)

    def started() -> int:
        return int(cluster.db.rows("SELECT count(*) AS n FROM attempts")[0]["n"])

    cluster.eventually(lambda: started() >= 100, 60, "the backlog to be draining")
    submitted = time.monotonic()
    [lone] = as_tenant(cluster.url, "other", [SubmitRequest("registry://jobs/nap", {"seconds": 0})])
    cluster.eventually(
        lambda: cluster.db.rows("SELECT 1 AS n FROM attempts WHERE execution_id = %s", (lone,)),
        30,
        "the other tenant's execution to start",
    )
    waited = time.monotonic() - submitted
    cluster.eventually(
        lambda: cluster.db.status_counts().get("SUCCEEDED", 0) == BACKLOG + 1,
        60,
        "every execution to succeed",
    )
    [row] = cluster.db.rows(
        "SELECT (SELECT count(*) FROM attempts a JOIN executions e USING (execution_id)"
        "        WHERE e.tenant = 'acme' AND a.started_at > o.ready_at"
        "          AND a.started_at < l.started_at) AS acme_between,"
        "       (SELECT count(*) FROM attempts a JOIN executions e USING (execution_id)"
        "        WHERE e.tenant = 'acme' AND a.started_at > l.started_at) AS acme_later"
        " FROM executions o JOIN attempts l USING (execution_id) WHERE o.execution_id = %s",
        (lone,),
    )
    # Claimed at the next claim: between its readiness and its start, acme started at most what
    # was running, what was claimed ahead and the rest of the claim that took it.
    acme_after_before_lone = int(row["acme_between"])
    assert acme_after_before_lone <= 3 * CONCURRENCY, acme_after_before_lone
    # ... and most of the backlog, READY before it, started after it.
    assert int(row["acme_later"]) > BACKLOG // 2, row
    print(
        f"\nthe other tenant's execution started {waited:.3f} s after its submission, after"
        f" {acme_after_before_lone} of acme's; {row['acme_later']} of acme's started after it"
    )
