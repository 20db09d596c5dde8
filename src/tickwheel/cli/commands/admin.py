"""Commands that work on the database directly: ``db upgrade`` and ``keys``. They run where the
database is reachable, like any migration tool, and need no API key.

The settings, the store and the API's key hashing are imported by the command that runs, not
here: ``tickwheel --help`` imports this module to list the commands (tests/unit/
test_startup_imports.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from tickwheel.cli.context import JsonFlag, console, fail, print_json, state
from tickwheel.domain.scopes import Scope

if TYPE_CHECKING:
    from tickwheel.store.protocol import Store

T = TypeVar("T")
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
keys_app = typer.Typer(help="API keys.", no_args_is_help=True)
DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url", envvar="TICKWHEEL_DATABASE_URL", help="default: sqlite:///tickwheel.db"
    ),
]


def with_store(
    url: str | None,
    work: Callable[[Store], Awaitable[T]],
    *,
    schema: bool = True,
    create: bool = True,
) -> T:
    """Runs ``work`` on an open store. With ``schema``, the database must be usable first: a
    SQLite file is migrated (as the server would), a PostgreSQL one must be up to date. Without
    ``create``, a SQLite file that does not exist is an error (a typo must not make a new one)."""
    import asyncio

    from tickwheel.store.factory import open_store

    target = url or default_database_url()
    path = target.removeprefix("sqlite:///") if target.startswith("sqlite:///") else None
    if not create and path and not Path(path).is_file():
        raise fail(f"no SQLite database at {path}")

    async def run() -> T:
        store = await open_store(target)
        try:
            if schema:
                await _ready(store, target)
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except (OSError, ValueError, RuntimeError) as exc:
        raise fail(str(exc)) from exc


def default_database_url() -> str:
    """``TICKWHEEL_DATABASE_URL`` as the server reads it (the settings, pydantic and all, are
    loaded here, by a command that opens the database)."""
    from tickwheel.config import Settings

    return Settings().database_url


def redact(url: str) -> str:
    """The URL without its password, for messages (``store.factory.redact``)."""
    from tickwheel.store import factory

    return factory.redact(url)


async def _ready(store: Store, url: str) -> None:
    if store.dialect == "sqlite":
        await store.migrate()
    elif pending := await store.migrations_pending():
        raise RuntimeError(
            f"the database {redact(url)} needs migrations {', '.join(pending)}: "
            "run 'tickwheel db upgrade' first"
        )


@db_app.command()
def upgrade(database_url: DatabaseUrl = None) -> None:
    """Apply pending migrations."""
    url = database_url or default_database_url()
    applied = with_store(url, lambda s: s.migrate(), schema=False)
    if applied:
        for label in applied:
            console.print(f"[green]applied[/] {label}")
    else:
        console.print(f"{redact(url)} is up to date")


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option(help="every query of this key is scoped to the tenant")],
    scope: Annotated[
        Scope,
        typer.Option(
            help="read < submit < admin < operator (operator: publishes shared definitions "
            "for every tenant; only this command creates one)"
        ),
    ] = Scope.SUBMIT,
    name: Annotated[str, typer.Option(help="a note for people")] = "",
    database_url: DatabaseUrl = None,
) -> None:
    """Create an API key; its secret is printed once and stored only as a hash."""
    if not tenant.strip():
        raise fail("--tenant must not be empty")

    from tickwheel.api.auth import create_key
    from tickwheel.domain.clock import SystemClock

    async def work(store: Store) -> str:
        _, secret = await create_key(store, tenant, scope, name, SystemClock().now())
        return secret

    secret = with_store(database_url, work)
    console.print(f"created a {scope} key for tenant {tenant} (shown once, keep it safe):")
    print(secret)


@keys_app.command("list")
def keys_list(
    ctx: typer.Context, database_url: DatabaseUrl = None, as_json: JsonFlag = False
) -> None:
    """Keys by id, tenant and scope (never their secrets)."""
    from rich.table import Table

    keys = with_store(database_url, lambda s: s.api_key_list(), create=False)
    if state(ctx, as_json).as_json:
        print_json(
            [
                {
                    "keyId": k.key_id,
                    "tenant": k.tenant,
                    "scope": str(k.scope),
                    "name": k.name,
                    "createdAt": k.created_at.isoformat(),
                    "revokedAt": k.revoked_at.isoformat() if k.revoked_at else None,
                }
                for k in keys
            ]
        )
        return
    table = Table("id", "tenant", "scope", "name", "created", "revoked")
    for k in keys:
        table.add_row(
            k.key_id,
            k.tenant,
            str(k.scope),
            k.name,
            k.created_at.isoformat(timespec="seconds"),
            k.revoked_at.isoformat(timespec="seconds") if k.revoked_at else "-",
        )
    console.print(table)


@keys_app.command("revoke")
def keys_revoke(key_id: str, database_url: DatabaseUrl = None) -> None:
    """Revoke a key by id; requests with it get 401 from then on."""
    from tickwheel.domain.clock import SystemClock

    revoke = lambda s: s.api_key_revoke(key_id, SystemClock().now())  # noqa: E731
    if not with_store(database_url, revoke, create=False):
        raise fail(f"no active key with id {key_id}")
    console.print(f"revoked {key_id}")
