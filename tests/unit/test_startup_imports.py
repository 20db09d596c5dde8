"""A role process starts claiming as soon as its imports are done: ``tickwheel worker`` and
``tickwheel scheduler`` must not import the web stack, the SDK or the other commands' modules.
Each check runs in a fresh interpreter, since this one has imported everything already."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tickwheel
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
    return found


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
