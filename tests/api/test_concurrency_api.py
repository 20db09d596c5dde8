"""Concurrency limits through the API and the SDK over HTTP (both backends): the definition's
block, a submission's override, the evaluated key in every answer, and bad input refused
with its path and nothing stored."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.api.conftest import Api
from tests.factories import T0, definition_doc
from tickwheel.client.client import AsyncClient
from tickwheel.client.transports.http import HttpTransport
from tickwheel.domain.errors import InvalidInput
from tickwheel.resources.executions import ConcurrencyGroup

LEASE = timedelta(minutes=5)
SYNC = definition_doc(
    "sync",
    inputs={"customer": "string"},
    concurrency={"key": "${{ inputs.customer }}", "limit": 1},
)


async def register(api: Api, doc: dict[str, Any] = SYNC) -> None:
    r = await api.http.put("/v1/definitions", json=doc)
    assert r.status_code in (200, 201), r.text


def sdk(api: Api) -> AsyncClient:
    return AsyncClient(transport=HttpTransport("http://testserver", api.admin_key, http=api.http))


async def test_the_definitions_limit_applies_and_a_submission_overrides_it(api: Api) -> None:
    await register(api)
    got = await api.http.get("/v1/definitions/sync")
    assert got.json()["items"][0]["concurrency"] == {
        "key": "${{ inputs.customer }}",
        "limit": 1,
        "order": "fifo",
    }
    client = sdk(api)
    e = await client.submit("sync", {"customer": "c-1"})
    assert e.concurrency == ConcurrencyGroup(key="c-1", limit=1, order="fifo")
    assert e.to_wire()["concurrency"] == {"key": "c-1", "limit": 1, "order": "fifo"}
    mine = await client.submit(
        "sync", {"customer": "c-1"}, concurrency={"limit": 3, "order": "none"}
    )
    assert mine.concurrency == ConcurrencyGroup(key="", limit=3, order="none")
    # Read back the same, and the store has it: two executions of one key, limit 1 vs 3.
    again = await client.get(mine.execution_id)
    assert again.concurrency == mine.concurrency
    claimed = await api.store.execution_claim_ready("w", 10, LEASE, T0)
    assert {c.execution_id for c in claimed} == {e.execution_id, mine.execution_id}


async def test_an_execution_without_a_limit_answers_without_the_field(api: Api) -> None:
    await register(api, definition_doc("plain"))
    r = await api.http.post(
        "/v1/executions", json={"definitionUri": "registry://jobs/plain", "inputs": {"name": "a"}}
    )
    assert r.status_code == 201, r.text
    assert "concurrency" not in r.json()


@pytest.mark.parametrize(
    ("concurrency", "path"),
    [
        ({"limit": 0}, "concurrency.limit"),
        ({"limit": "1"}, "concurrency.limit"),
        ({"limit": 1, "order": "random"}, "concurrency.order"),
        ({"limit": 1, "key": "${{ inputs.missing }}"}, "concurrency.key"),
        ({"limit": 1, "key": "${{ secrets.TOKEN }}"}, "concurrency.key"),
        ({"limit": 1, "extra": True}, "concurrency.extra"),
    ],
)
async def test_bad_concurrency_is_422_with_its_path_and_stores_nothing(
    api: Api, concurrency: dict[str, Any], path: str
) -> None:
    await register(api)
    body = {
        "definitionUri": "registry://jobs/sync",
        "inputs": {"customer": "c"},
        "concurrency": concurrency,
    }
    r = await api.http.post("/v1/executions", json=body)
    assert r.status_code == 422, r.text
    assert path in {d["path"] for d in r.json()["error"]["details"]}
    assert (await api.http.get("/v1/executions")).json()["items"] == []


async def test_the_sdk_checks_a_concurrency_before_sending(api: Api) -> None:
    with pytest.raises(InvalidInput):
        await sdk(api).submit("sync", {"customer": "c"}, concurrency={"limit": -2})


async def test_a_definition_with_a_bad_block_is_refused(api: Api) -> None:
    bad = definition_doc("sync", concurrency={"key": "${{ inputs.nope }}", "limit": 1})
    r = await api.http.put("/v1/definitions", json=bad)
    assert r.status_code == 422
    assert [d["path"] for d in r.json()["error"]["details"]] == ["concurrency.key"]
