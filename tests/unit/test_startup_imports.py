"""A role process starts claiming as soon as its imports are done: ``tickwheel worker`` and
``tickwheel scheduler`` must not import the web stack, the SDK or the other commands' modules.
The other commands import what they run, when they run: ``tickwheel --help`` lists every
command without the server, a store, the engine or the SDK, and ``tickwheel get`` talks HTTP
without the in-process transport, the app layer or a store. Each check runs in a fresh
interpreter, since this one has imported everything already."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import tickwheel
import tickwheel.client
from tickwheel.cli import main as cli_main

# What a worker or a scheduler never needs before (or while) claiming.
NOT_FOR_ROLES = (
    "fastapi",
    "starlette",
    "uvicorn",
    "jinja2",
    "tickwheel.api",
    "tickwheel.dashboard",
    "tickwheel.client",
    "tickwheel.cron",
    "tickwheel.workflows",
    "tickwheel.cli.commands.executions",
    "tickwheel.cli.commands.cron",
    "tickwheel.cli.commands.admin",
)


def loaded_after(code: str, prefixes: tuple[str, ...]) -> list[str]:
    """Which of ``prefixes`` (packages or modules) ``code`` leaves in ``sys.modules``."""
    return run_listing(code, prefixes)[0]


def run_listing(code: str, prefixes: tuple[str, ...]) -> tuple[list[str], str]:
    """``loaded_after``'s list, and what ``code`` wrote to standard error."""
    script = textwrap.dedent(code) + textwrap.dedent(f"""
        import json, sys
        prefixes = {prefixes!r}
        print(json.dumps(sorted({{
            p for p in prefixes for m in sys.modules if m == p or m.startswith(p + ".")
        }})))
        """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    found: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return found, done.stderr


def role_start(tmp_path: Path) -> str:
    """The start of ``tickwheel worker``/``scheduler`` up to its first claim: the CLI resolves
    the command, which looks up ``run_roles`` in ``tickwheel.server``; ``prepare`` opens and
    checks the store and the engine builds its services (a scheduler and a worker here)."""
    return f"""
        import asyncio
        import typer.main
        from tickwheel.cli.main import app

        group = typer.main.get_command(app)
        for name in ("worker", "scheduler"):
            assert group.commands[name].callback is not None
        from tickwheel.config import Settings
        from tickwheel.server import Engine, StartupError, exit_past_stuck_jobs, prepare, run_roles
        import tickwheel.store.postgres.store  # the worker's backend on PostgreSQL

        async def start() -> None:
            settings = Settings(_env_file=None, database_url="sqlite:///{tmp_path / "t.db"}")
            prepared = await prepare(settings, serves_api=False)
            Engine(prepared.store, settings, scheduler=True, worker=True, leased=True)
            await prepared.store.close()

        asyncio.run(start())
        """


def test_a_role_process_imports_no_web_stack_and_no_sdk(tmp_path: Path) -> None:
    assert loaded_after(role_start(tmp_path), NOT_FOR_ROLES) == []


def test_a_role_process_imports_no_http_client(tmp_path: Path) -> None:
    """httpx is loaded by the first http execution or webhook delivery, not at start (it
    was a sixth of a worker's imports); rich by the first thing a command prints, and
    multiprocessing by the first job isolated in a process of its own."""
    lazy = ("httpx", "rich", "multiprocessing", "tickwheel.engine.runners.isolated")
    assert loaded_after(role_start(tmp_path), lazy) == []


def test_untraced_claims_and_promotions_load_no_opentelemetry() -> None:
    """A claim or a promotion of executions without a stored trace context makes no span, so it
    loads no OpenTelemetry: its import came with a worker's first claim, in every drain's
    start-up."""
    code = """
        import uuid
        from types import SimpleNamespace
        from tickwheel.observability.tracing import record_batch, record_claims

        claimed = SimpleNamespace(
            trace_context=None, fencing_token=7, execution_id=uuid.uuid4(),
            definition_uri="registry://jobs/noop", attempt_count=1,
        )
        record_claims([claimed], 0)
        record_batch("tickwheel.promote", [(None, {})], 0)
        """
    assert loaded_after(code, ("opentelemetry",)) == []


def test_the_postgresql_store_loads_no_workflow_or_cron_domain() -> None:
    """A worker's store writes a workflow's outbox row and a dead letter's webhook row from a
    small module (store/postgres/outbox.py) and reads a task run's key prefix from another
    (store/workflow_keys.py): the workflow documents' parsers (yaml, defusedxml) and the cron
    domain (cronsim), ~45 ms of a start's imports, wait for the stores that need them."""
    heavy = ("yaml", "defusedxml", "cronsim", "tickwheel.domain.workflows", "tickwheel.domain.cron")
    assert loaded_after("import tickwheel.store.postgres.store", heavy) == []


def test_importing_the_package_loads_nothing_of_the_sdk() -> None:
    heavy = ("tickwheel.client", "tickwheel.app", "tickwheel.pyjobs", "httpx", "pydantic")
    assert loaded_after("import tickwheel", heavy) == []
    # The public names still come from the package, on first use.
    assert loaded_after("from tickwheel import TickwheelError", heavy) == []


def test_every_public_name_resolves() -> None:
    for name in tickwheel.__all__:
        assert getattr(tickwheel, name) is not None, name
    assert set(tickwheel.__all__) <= set(dir(tickwheel))
    namespace: dict[str, object] = {}
    exec("from tickwheel import *", namespace)  # the star import users write
    assert set(tickwheel.__all__) <= set(namespace)
    from tickwheel.client.sync import Client
    from tickwheel.domain.submission import SubmitRequest

    assert tickwheel.Client is Client and tickwheel.SubmitRequest is SubmitRequest
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        tickwheel.Nope  # type: ignore[attr-defined]  # noqa: B018


def test_the_command_table_names_what_each_registration_adds() -> None:
    """A command registered but not listed would be unreachable; one listed but not registered
    would fail only when typed."""
    added: dict[str, set[str]] = {}
    for register in cli_main.COMMANDS.values():
        added.setdefault(register.__name__, set()).update(cli_main.load(register))
    listed: dict[str, set[str]] = {}
    for name, register in cli_main.COMMANDS.items():
        listed.setdefault(register.__name__, set()).add(name)
    assert added == listed


def test_the_server_names_are_not_shadowed_by_its_modules() -> None:
    """Importing ``tickwheel.server.x`` sets the package's ``x`` to the module: no part of the
    package may be named like one of its names (``prepare`` once was)."""
    code = """
        import types
        import tickwheel.server as server
        from tickwheel.server import in_process, roles, serving, startup
        shadowed = [n for n in server.__all__ if isinstance(getattr(server, n), types.ModuleType)]
        assert shadowed == [], shadowed
        """
    assert loaded_after(code, ()) == []


# What a command of the CLI does not import unless it runs it: the server and the web stack,
# the stores and their drivers, the engine and the application layer (the in-process transport's).
SERVER_SIDE = (
    "tickwheel.server",
    "tickwheel.api",
    "tickwheel.dashboard",
    "tickwheel.store",
    "tickwheel.engine",
    "tickwheel.app",
    "tickwheel.services",
    "tickwheel.cron",
    "tickwheel.workflows",
    "tickwheel.client.transports.inprocess",
    "tickwheel.client.caller_tx",
    "uvicorn",
    "fastapi",
    "starlette",
    "psycopg",
    "psycopg_pool",
    "aiosqlite",
)
# What only a command that runs needs: the SDK (the resource models, httpx), the settings
# (pydantic-settings) and the cron file's reader (yaml). Not pydantic itself: Typer builds a
# pydantic ``TypeAdapter`` for each parameter of the command it parses, ``--help`` or not.
RUN_ONLY = (
    "tickwheel.client",
    "tickwheel.resources",
    "tickwheel.config",
    "tickwheel.observability",
    "httpx",
    "pydantic_settings",
    "yaml",
)


def cli_run(*argv: str) -> str:
    """``tickwheel *argv`` as the console script runs it (``cli.main.main``), to its exit."""
    return f"""
        import sys
        from tickwheel.cli.main import main

        sys.argv = ["tickwheel", *{argv!r}]
        try:
            main()
        except SystemExit:
            pass
        """


def test_the_help_imports_no_server_no_store_and_no_sdk() -> None:
    assert loaded_after(cli_run("--help"), (*SERVER_SIDE, *RUN_ONLY, "pydantic")) == []


@pytest.mark.parametrize(
    "command",
    [
        ("submit",),
        ("get",),
        ("definitions", "apply"),
        ("tenant", "pause"),
        ("keys", "create"),
        ("db", "upgrade"),
        ("db", "partitions", "drop"),
        ("prune",),
        ("cron", "create"),
        ("cron", "apply"),
        ("workflows", "run"),
        ("webhooks", "add"),
        ("server",),
        ("worker",),
    ],
    ids=" ".join,
)
def test_a_commands_help_imports_no_server_no_store_and_no_sdk(command: tuple[str, ...]) -> None:
    """Its options' help and defaults (the key scopes, the webhook events, the batch sizes of
    ``prune`` and ``db partitions drop``) come from small modules (``domain/scopes.py``,
    ``domain/webhook_events.py``, ``domain/retention.py``)."""
    assert loaded_after(cli_run(*command, "--help"), SERVER_SIDE + RUN_ONLY) == []


class _NoSuchExecution(BaseHTTPRequestHandler):
    """An API that knows no execution: every GET is the API's 404."""

    def do_GET(self) -> None:
        body = json.dumps({"error": {"code": "not_found", "message": "no such execution"}})
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def api_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NoSuchExecution)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_an_api_command_imports_no_server_no_store_and_no_app_layer(api_url: str) -> None:
    """``tickwheel get`` runs to the API's answer (a 404 here, explained on standard error)
    over HTTP: the in-process transport, which brings the app layer and the store protocols,
    is never imported, nor are the SDK's cron, workflow, webhook and flow clients."""
    unused = (
        "tickwheel.client.cron",
        "tickwheel.client.cron_wire",
        "tickwheel.client.workflows",
        "tickwheel.client.webhooks",
        "tickwheel.client.flow",
        "tickwheel.resources.cron",
        "tickwheel.resources.workflows",
        "yaml",
    )
    run = cli_run("--url", api_url, "get", "00000000-0000-4000-8000-000000000001")
    loaded, stderr = run_listing(run, (*SERVER_SIDE, *unused, "httpx"))
    assert "no such execution" in stderr  # the command ran to the API's answer
    assert loaded == ["httpx"]


def test_importing_the_sdk_loads_neither_transport_nor_the_server() -> None:
    """``import tickwheel.client`` loads nothing but its package (PEP 562); the HTTP client
    itself loads neither the in-process transport nor the app layer, and its sub-clients only
    when first used."""
    heavy = (*SERVER_SIDE, "tickwheel.client.transports", "httpx", "pydantic")
    assert loaded_after("import tickwheel.client", heavy) == []
    made = """
        from tickwheel.client import Client

        with Client("http://127.0.0.1:9", "key") as client:
            pass
        """
    assert loaded_after(made, (*SERVER_SIDE, "tickwheel.client.cron", "yaml")) == []
    used = """
        from tickwheel.client import Client

        with Client("http://127.0.0.1:9", "key") as client:
            assert client.cron is client.cron and client.flow is client.flow
            assert client._async.cron is client.cron._inner
        """
    assert loaded_after(used, SERVER_SIDE) == []


def test_every_public_name_of_the_sdk_resolves() -> None:
    from tickwheel.client.client import AsyncClient
    from tickwheel.client.cron import CronJobInfo
    from tickwheel.client.sync import Client

    for name in tickwheel.client.__all__:
        assert getattr(tickwheel.client, name) is not None, name
    assert set(tickwheel.client.__all__) <= set(dir(tickwheel.client))
    namespace: dict[str, object] = {}
    exec("from tickwheel.client import *", namespace)
    assert set(tickwheel.client.__all__) <= set(namespace)
    assert tickwheel.client.Client is Client and tickwheel.client.AsyncClient is AsyncClient
    assert tickwheel.client.CronJobInfo is CronJobInfo
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        tickwheel.client.Nope  # type: ignore[attr-defined]  # noqa: B018


def test_the_moved_names_are_still_where_they_were() -> None:
    """The leaves the CLI's help reads are re-exported from their old homes."""
    from tickwheel.domain import models, retention, scopes, webhook_events, webhooks
    from tickwheel.engine.pruner import DEFAULT_BATCH
    from tickwheel.services.settings import PrunerSettings
    from tickwheel.store.postgres import partitions

    assert models.Scope is scopes.Scope and webhooks.WebhookEvent is webhook_events.WebhookEvent
    assert DEFAULT_BATCH == PrunerSettings.batch == retention.PRUNE_BATCH == 1000
    assert partitions.DEFAULT_BATCH == retention.DROP_BATCH == 5000
