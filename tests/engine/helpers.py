"""Builders and small fakes for the runner tests: definitions, contexts, a loopback HTTP server,
a fake container runtime and a check that a process is gone."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

from tickwheel.domain.addresses import parse_networks
from tickwheel.domain.definitions import Definition, Execution, FieldSpec, FieldType
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.engine.runners import JobContext, Runner, default_runners

EXECUTION_ID = uuid.UUID("0196a3b2-0000-7000-8000-00000000c0de")

# The runner tests run this suite's job modules, any command, any image (a fake runtime) and
# call an HTTP server on loopback: a worker runs none of that unless its operator allows it
# (docs/worker_policy.md), so these tests allow it explicitly.
TEST_POLICY = RunPolicy(
    python_modules=("tests",),
    commands=("*",),
    container_images=("*",),
    http_allow_networks=parse_networks(["127.0.0.0/8"]),
)
RUNNERS: dict[str, Runner] = dict(default_runners(policy=TEST_POLICY))


def definition(execution: Execution, timeout: float = 5.0, **outputs: str) -> Definition:
    """A definition running ``execution``, declaring ``outputs`` as name=type (all required)."""
    specs = {name: FieldSpec(FieldType(kind)) for name, kind in outputs.items()}
    return Definition(name="job", version=2, execution=execution, outputs=specs, timeout=timeout)


def context(attempt: int = 2) -> JobContext:
    return JobContext(
        execution_id=EXECUTION_ID,
        attempt=attempt,
        fencing_token=41,
        definition_uri="registry://jobs/job",
        definition_version=2,
    )


def is_running(pid: int) -> bool:
    """Whether ``pid`` is a live process; a zombie is not (an orphan's reaping is init's job)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def python_argv(code: str, *args: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code, *args)


FAKE_RUNTIME = """\
import json, os, sys, time
log = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.jsonl")
with open(log, "a") as f:
    f.write(json.dumps({"argv": sys.argv[1:], "pid": os.getpid()}) + "\\n")
if sys.argv[1] == "run":
    stdin = json.load(sys.stdin)
    if "sleepy" in sys.argv:
        time.sleep(30)
    env = {k: v for k, v in os.environ.items() if k.startswith("TICKWHEEL_")}
    print("pulling image...")
    print(json.dumps({"argv": sys.argv[1:], "stdin": stdin, "env": env}))
"""


def fake_runtime(directory: Path, name: str = "docker") -> Path:
    """An executable that acts as a container runtime: it logs each call to ``calls.jsonl`` and,
    for ``run``, prints its argv, stdin and TICKWHEEL_* environment as a JSON object."""
    script = directory / name
    script.write_text(f"#!{sys.executable}\n{FAKE_RUNTIME}")
    script.chmod(0o755)
    return script


def runtime_calls(directory: Path) -> list[dict[str, Any]]:
    log = directory / "calls.jsonl"
    lines = log.read_text().splitlines() if log.exists() else []
    return [json.loads(line) for line in lines]


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Route = Callable[[Seen], Awaitable[tuple[int, dict[str, str], bytes]]]


@dataclass
class LoopbackServer:
    """A minimal HTTP/1.1 server on 127.0.0.1 (one request per connection) for the http runner."""

    routes: dict[str, Route]
    seen: list[Seen] = field(default_factory=list)
    url: str = ""
    _server: asyncio.Server | None = None
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            method, path, _ = (await reader.readline()).decode().split(" ", 2)
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            request = Seen(method, path, headers, body)
            self.seen.append(request)
            status, extra, payload = await self.routes[path](request)
            head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}"]
            head += [f"{k}: {v}" for k, v in extra.items()]
            head += [f"Content-Length: {len(payload)}", "Connection: close", "", ""]
            writer.write("\r\n".join(head).encode() + payload)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


def answer(status: int, body: bytes | Any = b"", **headers: str) -> Route:
    """A route that answers ``status`` with ``body`` (JSON-encoded unless bytes)."""
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()

    async def route(request: Seen) -> tuple[int, dict[str, str], bytes]:
        return status, {k.replace("_", "-"): v for k, v in headers.items()}, payload

    return route


async def echo(request: Seen) -> tuple[int, dict[str, str], bytes]:
    body = json.loads(request.body) if request.body else {}
    return 200, {"Content-Type": "application/json"}, json.dumps({"got": body}).encode()


async def slow(request: Seen) -> tuple[int, dict[str, str], bytes]:
    await asyncio.sleep(30)
    return 200, {}, b"{}"
