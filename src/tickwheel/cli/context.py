"""What every command needs: where the API is, which key to use, how to print."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tickwheel.domain.errors import TickwheelError

if TYPE_CHECKING:
    from rich.console import Console

    from tickwheel.client.sync import Client

    console: Console
    err_console: Console
    """Standard output and standard error as Rich consoles, made on first use (PEP 562,
    ``__getattr__`` below): a role process prints nothing through them unless it fails to
    start, and Rich was a twentieth of its imports."""


def __getattr__(name: str) -> Any:
    if name not in ("console", "err_console"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _console(stderr=name == "err_console")


def _console(*, stderr: bool) -> Console:
    name = "err_console" if stderr else "console"
    made: Console | None = globals().get(name)
    if made is None:
        from rich.console import Console

        made = Console(stderr=stderr)
        globals()[name] = made
    return made


JsonFlag = Annotated[
    bool, typer.Option("--json", help="print JSON instead of tables (also before the command)")
]
"""Every command that prints data takes ``--json`` after its name too, as people type it."""


class ExitCode(IntEnum):
    """The exit status of every command, and for ``--wait`` how the run ended, so that a CI
    script can use ``tickwheel submit --wait`` as a gate and still tell a failed job from a
    server it could not reach. Documented in the README and in ``tickwheel --help``."""

    OK = 0
    """Done; with ``--wait``: the run SUCCEEDED."""
    ERROR = 1
    """The command could not do it: the API refused (unknown id, conflict, key) or was down."""
    USAGE = 2
    """Bad flags or invalid input (the API's 400/422): nothing was done."""
    FAILED = 3
    """``--wait``: the run ended FAILED (for an execution: the dead letter)."""
    CANCELLED = 4
    """``--wait``: the run ended CANCELLED (or EXPIRED: not started by its deadline)."""
    TIMEOUT = 5
    """``--wait``: ``--timeout`` passed before the run finished; it goes on."""


EXIT_CODES_HELP = (
    "Exit codes: 0 done (with --wait: SUCCEEDED), 1 error from or reaching the API, "
    "2 usage error or invalid input, 3 FAILED, 4 CANCELLED or EXPIRED, "
    "5 --timeout passed before it finished."
)

_ENDED = {"SUCCEEDED": ExitCode.OK, "FAILED": ExitCode.FAILED}


def exit_code_for(status: str) -> ExitCode:
    """How a finished run's status becomes the exit code of a ``--wait``."""
    return _ENDED.get(status, ExitCode.CANCELLED)


@dataclass
class CliState:
    url: str
    api_key: str | None
    as_json: bool

    def client(self) -> Client:
        # Imported here: the role commands (worker, scheduler) never talk to the API.
        from tickwheel.client.sync import Client

        return Client(self.url, self.api_key)


def resolve_api_key(explicit: str | None) -> str | None:
    """``--api-key``, then ``TICKWHEEL_API_KEY``, then the admin key file of a local server."""
    if explicit:
        return explicit
    key_file = Path(os.environ.get("TICKWHEEL_ADMIN_KEY_FILE", "tickwheel.admin-key"))
    if key_file.is_file():
        return key_file.read_text().strip() or None
    return None


def state(ctx: typer.Context, as_json: bool = False) -> CliState:
    """The global options, with a command's own ``--json`` on top of ``tickwheel --json``."""
    value: CliState = ctx.ensure_object(CliState)
    return replace(value, as_json=True) if as_json else value


def fail(message: str, code: int = ExitCode.ERROR) -> typer.Exit:
    _console(stderr=True).print(f"[bold red]error:[/] {message}")
    return typer.Exit(code)


def explain(exc: Exception) -> typer.Exit:
    """Turns an SDK error into a message and a non-zero exit, never a traceback."""
    if isinstance(exc, TickwheelError):
        lines = [exc.message]
        if isinstance(exc.details, list):
            lines += [
                f"  {d.get('path')}: {d.get('message')}" for d in exc.details if isinstance(d, dict)
            ]
        usage = exc.code in ("invalid_input", "bad_request")
        return fail("\n".join(lines), ExitCode.USAGE if usage else ExitCode.ERROR)
    if exc.__class__.__module__.startswith("httpx"):
        return fail(
            f"cannot reach the tickwheel API ({exc.__class__.__name__}): is the server running?"
        )
    return fail(str(exc))


def print_json(data: Any) -> None:
    _console(stderr=False).print_json(json.dumps(data, default=str))
