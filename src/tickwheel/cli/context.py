"""What every command needs: where the API is, which key to use, how to print."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from tickwheel.client.client import Client
from tickwheel.domain.errors import TickwheelError

console = Console()
err_console = Console(stderr=True)


@dataclass
class CliState:
    url: str
    api_key: str | None
    as_json: bool

    def client(self) -> Client:
        return Client(self.url, self.api_key)


def resolve_api_key(explicit: str | None) -> str | None:
    """``--api-key``, then ``TICKWHEEL_API_KEY``, then the admin key file of a local server."""
    if explicit:
        return explicit
    key_file = Path(os.environ.get("TICKWHEEL_ADMIN_KEY_FILE", "tickwheel.admin-key"))
    if key_file.is_file():
        return key_file.read_text().strip() or None
    return None


def state(ctx: typer.Context) -> CliState:
    value: CliState = ctx.ensure_object(CliState)
    return value


def fail(message: str, code: int = 1) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}")
    return typer.Exit(code)


def explain(exc: Exception) -> typer.Exit:
    """Turns an SDK error into a message and a non-zero exit, never a traceback."""
    if isinstance(exc, TickwheelError):
        lines = [exc.message]
        if isinstance(exc.details, list):
            lines += [
                f"  {d.get('path')}: {d.get('message')}" for d in exc.details if isinstance(d, dict)
            ]
        return fail("\n".join(lines), 2 if exc.code in ("invalid_input", "bad_request") else 1)
    if exc.__class__.__module__.startswith("httpx"):
        return fail(
            f"cannot reach the tickwheel API ({exc.__class__.__name__}): is the server running?"
        )
    return fail(str(exc))


def print_json(data: Any) -> None:
    console.print_json(json.dumps(data, default=str))
