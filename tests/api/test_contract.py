"""The contract over the OpenAPI document (issue 12): schemathesis generates requests for every
operation, valid and not, sent with an admin key of a test tenant to a real server on each
backend. No request may get a 5xx, and each answer must match the schema its status documents
(the JSON error body for every 4xx). Bounded: a few dozen examples per operation."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
)

from tests.conftest import PG_ADMIN_URL
from tests.factories import definition_doc
from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.config import Settings
from tickwheel.domain.clock import SystemClock
from tickwheel.domain.models import Scope
from tickwheel.store.factory import open_store

EXAMPLES = int(os.environ.get("TICKWHEEL_CONTRACT_EXAMPLES", "15"))
CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]
WORKFLOW = """
name: contract
version: 1
inputs: {name: string}
tasks:
  - name: first
    definition: registry://jobs/greet
    inputs: {name: "${{ inputs.name }}"}
"""


@dataclass
class Served:
    url: str
    auth: dict[str, str]


def _serve(database_url: str, ready: threading.Event, box: dict[str, Any]) -> None:
    """Runs in its own thread and event loop: the store and the server live and die there."""

    async def main() -> None:
        store = await open_store(database_url)
        try:
            await store.migrate()
            clock = SystemClock()
            _, secret = await create_key(store, "contract", Scope.ADMIN, "contract", clock.now())
            app = create_app(store, Settings(_env_file=None), clock)  # type: ignore[call-arg]
            sock = socket.create_server(("127.0.0.1", 0))
            server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="off"))
            box.update(url=f"http://127.0.0.1:{sock.getsockname()[1]}", secret=secret)
            box["stop"] = lambda: setattr(server, "should_exit", True)
            ready.set()
            await server.serve(sockets=[sock])
        finally:
            await store.close()

    try:
        asyncio.run(main())
    except BaseException as exc:
        box["failed"] = exc
        ready.set()


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path
) -> Iterator[Served]:
    database = None
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("contract") / "contract.db"
        shutil.copyfile(sqlite_template, path)
        url = f"sqlite:///{path}"
    else:
        template = request.getfixturevalue("pg_migrated_template")
        database = f"tickwheel_contract_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{database}" TEMPLATE "{template}"')
        url = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + database
    ready, box = threading.Event(), {}
    thread = threading.Thread(target=_serve, args=(url, ready, box), daemon=True)
    thread.start()
    assert ready.wait(60), "the server did not start"
    if "failed" in box:
        raise box["failed"]
    auth = {"Authorization": f"Bearer {box['secret']}"}
    _seed(box["url"], auth)
    try:
        yield Served(box["url"], auth)
    finally:
        box["stop"]()
        thread.join(30)
        if database is not None:
            with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def _seed(url: str, auth: dict[str, str]) -> None:
    """Something for the generated requests to find: a definition, a workflow, a cron job."""
    with httpx.Client(base_url=url, headers=auth) as http:
        assert http.put("/v1/definitions", json=definition_doc()).status_code == 201
        r = http.put("/v1/workflows", content=WORKFLOW, headers={"Content-Type": "text/yaml"})
        assert r.status_code == 201, r.text
        job = {"name": "nightly", "definitionUri": "registry://jobs/greet"}
        inputs = {"inputs": {"name": "Ada"}}
        r = http.post("/v1/cron-jobs", json=job | inputs | {"expression": "0 2 * * *"})
        assert r.status_code == 201, r.text
        r = http.post("/v1/executions", json={"definitionUri": "registry://jobs/greet"} | inputs)
        assert r.status_code == 201, r.text


@pytest.mark.parametrize("mode", list(GenerationMode), ids=str)
def test_no_request_gets_a_5xx_and_answers_match_the_schema(
    served: Served, mode: GenerationMode
) -> None:
    """Every operation, each for ``EXAMPLES`` generated requests (valid ones, then ones that break
    the schema); the failures of all operations are reported together."""
    schema = schemathesis.openapi.from_url(f"{served.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 25
    failures: list[str] = []
    for operation in operations:

        @given(case=operation.as_strategy(mode))
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: Any) -> None:
            response = case.call(base_url=served.url, headers=served.auth, timeout=30)
            case.validate_response(response, checks=CHECKS)

        try:
            check()
        except Unsatisfiable:
            assert mode is GenerationMode.NEGATIVE  # nothing there that a request could break
        except Exception as exc:
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)
