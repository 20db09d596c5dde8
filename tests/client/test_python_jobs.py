"""Jobs defined in Python (``tickwheel.App``): the Definition their hints make (same registry,
versions and 409 rules as a file), typed submission checked before anything is stored, a worker
running them through the python runner and its run policy, and ``worker --app``'s loading."""

from __future__ import annotations

import gc
from datetime import date, timedelta
from pathlib import Path

import pytest

import tickwheel
from tests.client import pyjobs_sample
from tests.client.conftest import Database
from tests.client.pyjobs_sample import Invoice, Sum, add_async, send_invoice
from tickwheel.config import Settings
from tickwheel.domain.concurrency import ConcurrencySpec
from tickwheel.domain.errors import Conflict, InvalidInput
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.engine.worker import Worker
from tickwheel.pyjobs.loading import AppLoadError, load_app
from tickwheel.server import prepare
from tickwheel.store.factory import open_store

INVOICE = Invoice(order_id="o-1", total_cents=1200)


def test_the_hints_make_the_definition() -> None:
    d = send_invoice.definition
    assert (d.name, d.version, d.timeout, d.retry.max_attempts) == ("send-invoice", 1, 30.0, 5)
    assert d.description == "Send an invoice by e-mail."
    assert {n: (str(f.type), f.required, f.default) for n, f in d.inputs.items()} == {
        "invoice": ("object", True, None),
        "due": ("date", True, None),
        "copies": ("integer", False, 1),
        "note": ("string", False, None),
    }
    assert {n: str(f.type) for n, f in d.outputs.items()} == {
        "invoice_number": "string",
        "due": "string",
    }
    assert d.execution.entrypoint == "tests.client.pyjobs_sample:send_invoice.run"  # type: ignore[union-attr]
    assert "context" not in add_async.definition.inputs
    assert add_async.definition.retry.base_delay == 3


def test_a_job_without_hints_or_inside_a_function_is_refused() -> None:
    app = tickwheel.App()
    with pytest.raises(TypeError, match="inside a function"):

        @app.job(name="local")
        def local(x: int) -> None: ...

    with pytest.raises(TypeError, match="private"):
        app.job(name="plain")(_plain)
    with pytest.raises(TypeError, match="does not declare the outputs"):
        app.job(name="plain")(plain)

    def untyped(x):  # type: ignore[no-untyped-def]
        return x

    untyped.__qualname__ = "untyped"
    with pytest.raises(TypeError, match="needs a type hint"):
        app.job(name="untyped")(untyped)


async def test_submitted_jobs_run_on_a_worker(database: Database) -> None:
    with tickwheel.connect(database.url, tenant="acme") as client:
        pyjobs_sample.app.use(client)
        try:
            first = send_invoice.submit(invoice=INVOICE, due=date(2026, 12, 31), copies=2)
            later = add_async.submit_after(timedelta(hours=1), a=1, b=2)
            now = add_async.submit(a=2, b=3)
        finally:
            pyjobs_sample.app.use(None)
        assert first.inputs == {
            "invoice": {"order_id": "o-1", "total_cents": 1200},
            "due": "2026-12-31",
            "copies": 2,
        }
        assert later.status == "SCHEDULED"
        # The same registry as a file: listed, versioned, shown by `definitions get`.
        assert {d.name for d in client.definitions()} == {"send-invoice", "add-async"}
        store = await open_store(database.url)
        try:
            worker = Worker(store, worker_id="w1")
            assert await worker.run_once() == 2
            await worker.drain()
        finally:
            await store.close()
        assert client.output(first.execution_id) == {
            "invoice_number": "INV-o-1-2",
            "due": "2026-12-31",
        }
        assert client.output(now.execution_id) == {"sum": 5, "attempt": 1}


def test_arguments_are_checked_before_anything_is_stored(database: Database) -> None:
    with tickwheel.connect(database.url, tenant="acme") as client:
        pyjobs_sample.app.use(client)
        try:
            with pytest.raises(TypeError, match="missing a required argument: 'due'"):
                send_invoice.submit(invoice=INVOICE)
            with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
                add_async.submit(a=1, b=2, colour="red")
            with pytest.raises(TypeError, match="given by the worker"):
                add_async.submit(a=1, b=2, context=None)
            with pytest.raises(TypeError, match="missing a required argument: 'b'"):
                add_async.submit_many([{"a": 1, "b": 2}, {"a": 1, "c": 2}])
            assert client.list().items == []
            results = add_async.submit_many([{"a": 1, "b": 2}, {"a": 3, "b": 4}])
            assert [r.status for r in results] == [201, 201]
        finally:
            pyjobs_sample.app.use(None)


def test_a_changed_job_under_a_registered_version_is_a_conflict(database: Database) -> None:
    with tickwheel.connect(database.url, tenant="acme") as client:
        pyjobs_sample.app.register(client)
        with pytest.raises(Conflict):
            other_app.register(client)


def test_worker_app_loading_obeys_the_run_policy() -> None:
    app = load_app("tests.client.pyjobs_sample:app", RunPolicy())
    assert set(app.jobs) == {"send-invoice", "add-async"}
    with pytest.raises(AppLoadError, match="refused"):
        load_app("tests.client.pyjobs_sample:app", RunPolicy(python_modules=("myproject",)))
    with pytest.raises(AppLoadError, match=r"not a tickwheel\.App"):
        load_app("tests.client.pyjobs_sample:INVOICE", RunPolicy())
    with pytest.raises(AppLoadError, match="standard library"):
        load_app("os:environ", RunPolicy())


async def test_the_worker_role_registers_the_apps_jobs(tmp_path: Path) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'w.db'}",
        apps="tests.client.pyjobs_sample:app",
    )
    prepared = await prepare(settings, serves_api=False)
    try:
        assert prepared.definition_uris == [
            "registry://jobs/send-invoice",
            "registry://jobs/add-async",
        ]
        stored = await prepared.store.definition_get("any-tenant", "send-invoice", 1)
        assert stored is not None
        assert stored.definition == send_invoice.definition
    finally:
        await prepared.store.close()


def plain(x: int) -> dict[str, int]:
    return {"x": x}


def _plain(x: int) -> None: ...


other_app = tickwheel.App()


@other_app.job(name="add-async", version=2)  # other inputs under a registered version
def add_three(a: int, b: int, c: int) -> Sum:
    return {"sum": a + b + c, "attempt": 1}


def test_each_new_client_registers_the_jobs_in_its_own_database(tmp_path: Path) -> None:
    """Registration is remembered per client object and forgotten with it, not kept by ``id()``:
    a client made after another was collected can get the same id (CI saw it: the PostgreSQL
    client of one test took the SQLite client's id, skipped registering and got 422s)."""
    for round_ in range(3):
        url = f"sqlite:///{tmp_path}/db{round_}.sqlite"
        with tickwheel.connect(url, tenant="acme") as client:
            pyjobs_sample.app.use(client)
            try:
                assert add_async.submit(a=round_, b=1).status == "READY"
            finally:
                pyjobs_sample.app.use(None)
        del client
        gc.collect()
        assert len(pyjobs_sample.app._registered) == 0  # nothing left for a reused id to match


def sync_customer(customer: str) -> Sum:
    return {"sum": len(customer), "attempt": 1}


def test_a_job_may_declare_a_concurrency_limit() -> None:
    app = tickwheel.App()
    limit = {"key": "${{ inputs.customer }}", "limit": 1}
    job = app.job(name="sync-customer", concurrency=limit)(sync_customer)
    assert job.definition.concurrency == ConcurrencySpec(limit=1, key="${{ inputs.customer }}")
    with pytest.raises(InvalidInput, match="invalid definition"):
        app.job(name="sync-other", concurrency={"key": "${{ inputs.nope }}", "limit": 1})(
            sync_customer
        )
