"""A batch answered with receipts (``submit_many(..., answer="ids")``, ``Prefer: return=minimal``)
is the same submission as one answered in full: the same checks, the same outcome per item
(created, the original of a key, a conflict, invalid), the same errors, the same tenant
isolation of idempotency keys; only the answer is lighter. On both backends, through the SDK on
the in-process and the HTTP transports, and through the route itself."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest

from tests.api.conftest import Api
from tests.factories import T0, definition_doc
from tickwheel import AsyncClient, SubmitReceipt, SubmitRequest
from tickwheel.api.auth import create_key
from tickwheel.api.prefer import prefers_minimal
from tickwheel.app import executions as executions_module
from tickwheel.client.transports.http import HttpTransport
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.domain.errors import NotFound
from tickwheel.domain.models import ExecutionFilter, Scope
from tickwheel.resources.executions import BatchReceipts, receipts_wire

URI = "registry://jobs/greet"
BODY = {"definitionUri": URI, "inputs": {"name": "Ada"}}
Connect = Callable[[str], Awaitable[AsyncClient]]


@pytest.fixture(params=["inprocess", "http"])
def connect(request: pytest.FixtureRequest, api: Api) -> Connect:
    """An SDK client of a tenant (with the greet definition its own) on either transport. Not
    closed by the tests: the HTTP one would close the fixture's httpx client."""

    async def make(tenant: str) -> AsyncClient:
        local = InProcessTransport(api.store, tenant, api.clock)
        await local.definition_apply(_definition_bytes(), "json")
        if request.param == "inprocess":
            return AsyncClient(transport=local, clock=api.clock)
        _, secret = await create_key(api.store, tenant, Scope.ADMIN, "t", T0)
        http = HttpTransport("http://testserver", secret, http=api.http, backoff=0)
        return AsyncClient(transport=http, clock=api.clock)

    return make


def _definition_bytes() -> bytes:
    return json.dumps(definition_doc()).encode()


def item(name: object = "Ada", key: str | None = None, uri: str = URI) -> SubmitRequest:
    return SubmitRequest(uri, {"name": name}, idempotency_key=key)


def batch() -> list[SubmitRequest]:
    """Every outcome a batch item can have, after ``old`` was submitted with Ada."""
    later = T0 + timedelta(hours=1)
    return [
        item("Bob", "new"),  # 201
        item("Ada", "old"),  # 200: the original
        item("Eve", "old"),  # 409: the key was used for another request
        item(5, "bad"),  # 422: inputs
        item("Ada", "nodef", uri="registry://jobs/nope"),  # 422: no such definition
        item("Bob", "new"),  # 200: the first item of this batch
        item("Dan", "new"),  # 409: the same key in this batch with another request
        item("Kay"),  # 201, no key
        SubmitRequest(URI, {"name": "Zed"}, execute_at=later, idempotency_key="later"),  # 201
        item("Ada", "x" * 301),  # 422: the key too long
    ]


STATUSES = [201, 200, 409, 422, 422, 200, 409, 201, 201, 422]
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def normalized(original: uuid.UUID, receipts: list[SubmitReceipt]) -> list[Any]:
    """The receipts with each id (also inside error messages) replaced by the order of its
    first appearance, the original's 0: two tenants' runs of one scenario then compare."""
    names: dict[str, str] = {str(original): "#0"}

    def name(text: str) -> str:
        return names.setdefault(text, f"#{len(names)}")

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            return _UUID.sub(lambda m: name(m.group()), value)
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value

    return [
        (r.status, None if r.execution_id is None else name(str(r.execution_id)), scrub(r.error))
        for r in receipts
    ]


async def run(connect: Connect, tenant: str, answer: str) -> tuple[uuid.UUID, list[Any]]:
    client = await connect(tenant)
    original = await client.submit(URI, {"name": "Ada"}, idempotency_key="old")
    if answer == "ids":
        receipts = await client.submit_many(batch(), answer="ids")
    else:
        receipts = [r.receipt() for r in await client.submit_many(batch())]
    return original.execution_id, receipts


async def test_receipts_are_the_full_answer_of_the_same_batch(connect: Connect, api: Api) -> None:
    full_original, full = await run(connect, "full", "full")
    ids_original, ids = await run(connect, "ids", "ids")
    assert [r.status for r in ids] == STATUSES
    assert all(type(r) is SubmitReceipt for r in ids)
    assert normalized(ids_original, ids) == normalized(full_original, full)
    assert ids[1].execution_id == ids_original and ids[5].execution_id == ids[0].execution_id
    assert [r.created for r in ids] == [s == 201 for s in STATUSES]
    assert [r.ok for r in ids] == [s < 300 for s in STATUSES]
    clash = ids[2].error
    assert clash is not None and clash["code"] == "conflict" and "'old'" in clash["message"]
    assert clash["details"]["executionId"] == str(ids_original)
    bad = ids[3].error
    assert bad is not None and bad["code"] == "invalid_input"
    assert bad["details"][0]["path"] == "inputs.name"
    # What the receipts name is what was stored, and nothing refused was.
    client = await connect("ids-read")
    for r in ids:
        if r.execution_id is not None:
            with pytest.raises(NotFound):  # another tenant's
                await client.get(r.execution_id)
    for r in ids:
        if r.execution_id is not None:
            got = await api.store.execution_get("ids", r.execution_id)
            assert got is not None and got.tenant == "ids"
    stored = await api.store.execution_list("ids", ExecutionFilter(), None, 100)
    assert len(stored) == 4  # old, new, the keyless one, later
    assert {e.idempotency_key for e in stored} >= {"old", "new", "later"}


async def test_a_key_of_another_tenant_is_not_found_by_receipts(connect: Connect) -> None:
    one, two = await connect("one"), await connect("two")
    theirs = await one.submit(URI, {"name": "Ada"}, idempotency_key="shared-key")
    mine = await two.submit_many([item("Ada", "shared-key")], answer="ids")
    other = await two.submit_many([item("Eve", "shared-key")], answer="ids")
    assert mine[0].status == 201 and mine[0].execution_id != theirs.execution_id
    assert other[0].status == 409  # against its own tenant's execution, not the other's
    assert other[0].error is not None
    assert str(theirs.execution_id) not in str(other[0].error)
    assert str(mine[0].execution_id) in other[0].error["message"]


async def test_a_batch_answers_only_full_or_ids(connect: Connect) -> None:
    client = await connect("acme")
    with pytest.raises(ValueError, match="answer"):
        await client.submit_many([item()], answer="json")  # type: ignore[call-overload]
    assert await api_free_count(client) == 0


async def api_free_count(client: AsyncClient) -> int:
    return len((await client.list()).items)


# -- the route ------------------------------------------------------------------------------------


@pytest.fixture
async def greet(api: Api) -> None:
    r = await api.http.put("/v1/definitions", json=definition_doc())
    assert r.status_code == 201


async def test_prefer_return_minimal_answers_receipts(api: Api, greet: None) -> None:
    original = await api.http.post("/v1/executions", json=BODY, headers={"Idempotency-Key": "o"})
    items = [
        {**BODY, "idempotencyKey": "a"},
        {**BODY, "idempotencyKey": "o"},
        {**BODY, "inputs": {"name": "Bob"}, "idempotencyKey": "o"},
        {**BODY, "inputs": {"name": 3}},
    ]
    r = await api.http.post(
        "/v1/executions/batch", json={"items": items}, headers={"Prefer": "return=minimal"}
    )
    assert r.status_code == 200, r.text
    assert r.headers["preference-applied"] == "return=minimal"
    answer = r.json()["items"]
    assert [i["status"] for i in answer] == [201, 200, 409, 422]
    assert answer[1] == {"status": 200, "executionId": original.json()["executionId"]}
    assert set(answer[0]) == {"status", "executionId"}
    assert set(answer[2]) == {"status", "error"} and answer[2]["error"]["code"] == "conflict"
    assert answer[3]["error"]["details"][0]["path"] == "inputs.name"
    # The same batch again in full: the same outcomes, each with its execution.
    full = await api.http.post("/v1/executions/batch", json={"items": items})
    assert "preference-applied" not in full.headers
    assert [i["status"] for i in full.json()["items"]] == [200, 200, 409, 422]
    assert full.json()["items"][0]["execution"]["executionId"] == answer[0]["executionId"]
    assert full.json()["items"][2]["error"] == answer[2]["error"]


@pytest.mark.parametrize(
    ("prefer", "minimal"),
    [
        ("return=minimal", True),
        ('RETURN = "minimal"', True),
        ("respond-async, return=minimal; x=1", True),
        ("return=representation", False),
        ("return=representation, return=minimal", False),  # the first one counts
        ("wait=5", False),
        ("return", False),
        ("minimal", False),
    ],
)
async def test_the_prefer_header_is_read_as_rfc_7240_says(
    api: Api, greet: None, prefer: str, minimal: bool
) -> None:
    assert prefers_minimal([prefer]) is minimal
    r = await api.http.post(
        "/v1/executions/batch", json={"items": [BODY]}, headers={"Prefer": prefer}
    )
    assert r.status_code == 200, r.text
    assert ("executionId" in r.json()["items"][0]) is minimal
    assert ("execution" in r.json()["items"][0]) is not minimal
    assert (r.headers.get("preference-applied") == "return=minimal") is minimal


async def test_two_prefer_fields_are_one_list(api: Api, greet: None) -> None:
    headers = [("Prefer", "wait=1"), ("Prefer", "return=minimal")]
    r = await api.http.post("/v1/executions/batch", json={"items": [BODY]}, headers=headers)
    assert r.status_code == 200 and r.headers["preference-applied"] == "return=minimal"


async def test_a_refused_request_is_refused_alike(api: Api, greet: None) -> None:
    minimal = {"Prefer": "return=minimal"}
    for body in ({"items": []}, {"items": [BODY], "more": 1}, {"items": [{"x": 1}]}):
        plain = await api.http.post("/v1/executions/batch", json=body)
        preferring = await api.http.post("/v1/executions/batch", json=body, headers=minimal)
        assert preferring.status_code == plain.status_code == 422
        assert preferring.json() == plain.json()
        assert "preference-applied" not in preferring.headers
    read = await api.key(Scope.READ)
    refused = await api.http.post(
        "/v1/executions/batch", json={"items": [BODY]}, headers={**read, **minimal}
    )
    assert refused.status_code == 403


async def test_the_openapi_document_describes_both_answers(api: Api) -> None:
    doc = (await api.http.get("/openapi.json")).json()
    route = doc["paths"]["/v1/executions/batch"]["post"]
    assert any(p["name"] == "Prefer" and p["in"] == "header" for p in route["parameters"])
    ok = route["responses"]["200"]
    assert "Preference-Applied" in ok["headers"]
    refs = {
        s["$ref"].rsplit("/", 1)[1] for s in ok["content"]["application/json"]["schema"]["anyOf"]
    }
    assert refs == {"BatchResult", "BatchReceipts"}
    receipt = doc["components"]["schemas"]["BatchReceipt"]
    assert set(receipt["properties"]) == {"status", "executionId", "error"}


def test_the_receipts_json_is_the_models() -> None:
    made = [
        SubmitReceipt(201, uuid.uuid4(), None),
        SubmitReceipt(422, None, {"code": "invalid_input", "message": "m", "details": None}),
    ]
    wire = receipts_wire(made)
    assert wire == BatchReceipts.model_validate(wire).to_wire()
    assert [r.receipt() for r in BatchReceipts.from_wire(wire).items] == made


async def test_an_older_servers_full_answer_is_read_into_receipts(api: Api, greet: None) -> None:
    """A server that ignores the preference answers in full: the SDK makes the same receipts."""

    async def ignore_prefer(request: httpx.Request) -> httpx.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() != "prefer"}
        return await api.http.post(request.url.path, content=request.content, headers=headers)

    old_server = httpx.AsyncClient(
        transport=httpx.MockTransport(ignore_prefer), base_url="http://testserver"
    )
    transport = HttpTransport("http://testserver", api.admin_key, http=old_server, backoff=0)
    async with AsyncClient(transport=transport, clock=api.clock) as client:
        receipts = await client.submit_many([item("Ada", "k"), item(5, "j")], answer="ids")
    assert [r.status for r in receipts] == [201, 422]
    assert receipts[0].execution_id is not None and receipts[1].error is not None


async def test_hostile_items_get_the_full_answers_refusals(api: Api, greet: None) -> None:
    """A huge integer, a lone surrogate (only a raw body can carry one) and an instant out of
    range, beside a valid item: receipts refuse each hostile item as the full answer does,
    and store nothing for it."""

    def body(suffix: str) -> bytes:
        items = [
            json.dumps({**BODY, "idempotencyKey": f"ok{suffix}"}),
            json.dumps({**BODY, "priority": 2**80, "idempotencyKey": f"int{suffix}"}),
            json.dumps({**BODY, "idempotencyKey": f"s{suffix}"}).replace('"Ada"', '"\\ud800"'),
            json.dumps(
                {**BODY, "executeAt": "99999-01-01T00:00:00Z", "idempotencyKey": f"t{suffix}"}
            ),
        ]
        return ('{"items": [' + ", ".join(items) + "]}").encode()

    json_type = {"Content-Type": "application/json"}
    full = await api.http.post("/v1/executions/batch", content=body("-f"), headers=json_type)
    minimal = await api.http.post(
        "/v1/executions/batch",
        content=body("-m"),
        headers={**json_type, "Prefer": "return=minimal"},
    )
    assert minimal.status_code == full.status_code, (minimal.text, full.text)
    if full.status_code != 200:  # refused whole: alike, and unpreferred
        assert minimal.json() == full.json()
        assert "preference-applied" not in minimal.headers
    else:
        answers = [(i["status"], i.get("error")) for i in full.json()["items"]]
        receipts = [(i["status"], i.get("error")) for i in minimal.json()["items"]]
        assert receipts == answers
        assert [s for s, _ in receipts] == [201, 422, 422, 422]
    listed = await api.http.get("/v1/executions", params={"limit": 100})
    keys = {e.get("idempotencyKey") for e in listed.json()["items"]}
    assert not keys & {"int-m", "s-m", "t-m", "int-f", "s-f", "t-f"}


async def test_the_sdk_in_process_writes_a_large_batch_in_chunks_and_the_route_in_one_piece(
    api: Api, greet: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK beside the store submits one batch at a time: its batch is made a chunk at a time
    while the store writes the previous one. The route serves several at once, where the event
    loop already overlaps one's Python with another's statement: one statement, as before
    (docs/scaling.md). The same outcomes either way."""
    monkeypatch.setattr(executions_module, "CHUNK", 2)
    ways: list[str] = []
    store = api.store
    one, in_chunks = store.execution_insert_or_existing, store.execution_insert_or_existing_chunks

    async def spied_one(items: Any) -> Any:
        ways.append("one")
        return await one(items)

    async def spied_chunks(chunks: Any) -> Any:
        ways.append("chunks")
        return await in_chunks(chunks)

    monkeypatch.setattr(store, "execution_insert_or_existing", spied_one)
    monkeypatch.setattr(store, "execution_insert_or_existing_chunks", spied_chunks)
    client = AsyncClient(transport=InProcessTransport(store, "acme", api.clock), clock=api.clock)
    await client.submit(URI, {"name": "Ada"}, idempotency_key="old")
    receipts = await client.submit_many(batch(), answer="ids")
    assert [r.status for r in receipts] == STATUSES
    assert ways[0] == "chunks"  # (SQLite's takes the chunks, then runs its one insert)
    ways.clear()
    items = [{**BODY, "idempotencyKey": key} for key in ("r1", "r2", "r3", "old")]
    r = await api.http.post(
        "/v1/executions/batch", json={"items": items}, headers={"Prefer": "return=minimal"}
    )
    assert [i["status"] for i in r.json()["items"]] == [201, 201, 201, 200]
    assert ways == ["one"]
