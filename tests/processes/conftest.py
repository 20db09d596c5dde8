"""Real processes on a real PostgreSQL: ``tickwheel scheduler`` and ``tickwheel worker`` run as
subprocesses and are stopped, frozen and killed with real signals.

Each test gets its own database (a copy of a template that ``tickwheel db upgrade`` migrated
once per session, dropped after), its own copy of the job module (``jobs.py``, imported
by the workers as ``tw_process_jobs``) and its own journal of what the handlers did. The
``cluster`` fixture starts processes, keeps their output in files and kills whatever is left at
the end (SIGCONT first, so that a frozen process can die); when a test fails, the output of every
process is printed."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest
from psycopg.rows import DictRow, dict_row

from tests.conftest import PG_ADMIN_URL
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.domain.definitions import definition_from_document
from tickwheel.domain.submission import SubmitRequest
from tickwheel.store.factory import open_store

REPO = Path(__file__).resolve().parents[2]
JOBS_SOURCE = Path(__file__).with_name("jobs.py")
JOBS_MODULE = "tw_process_jobs"
TENANT = "acme"
POLL = 0.05
STOP_TIMEOUT = 10.0
T = TypeVar("T")


def _executable() -> Path:
    beside = Path(sys.executable).with_name("tickwheel")
    return beside if beside.exists() else REPO / ".venv" / "bin" / "tickwheel"


TICKWHEEL = _executable()


# -- the database ---------------------------------------------------------------------------------


@pytest.fixture
def db_url(pg_migrated_template: str) -> Iterator[str]:
    """A fresh database for one test, a copy of the migrated template (``tests/conftest.py``),
    dropped after."""
    name = f"tickwheel_proc_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{pg_migrated_template}"')
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    try:
        yield url
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment without any ``TICKWHEEL_*`` setting, quiet and unbuffered."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
    env.update(PYTHONUNBUFFERED="1", TICKWHEEL_LOG_LEVEL="warning", NO_COLOR="1", TERM="dumb")
    env.update(extra)
    return env


class Db:
    """Synchronous reads of the test's database (the truth the assertions are about)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn: psycopg.Connection[DictRow] = psycopg.connect(
            url, autocommit=True, row_factory=dict_row
        )

    def close(self) -> None:
        self.conn.close()

    def rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[DictRow]:
        return self.conn.execute(sql, params).fetchall()

    def execution(self, execution_id: uuid.UUID) -> DictRow:
        [row] = self.rows("SELECT * FROM executions WHERE execution_id = %s", (execution_id,))
        return row

    def attempts(self, execution_id: uuid.UUID) -> list[DictRow]:
        return self.rows(
            "SELECT * FROM attempts WHERE execution_id = %s ORDER BY attempt_number",
            (execution_id,),
        )

    def status(self, execution_id: uuid.UUID) -> str:
        return str(self.execution(execution_id)["status"])

    def status_counts(self) -> dict[str, int]:
        rows = self.rows("SELECT status, count(*) AS n FROM executions GROUP BY status")
        return {str(r["status"]): int(r["n"]) for r in rows}

    def listeners(self) -> int:
        """Sessions of this database that LISTEN for tickwheel's wake-up signals: one per
        scheduler or worker process that has reached its idle wait."""
        [row] = self.rows(
            "SELECT count(*) AS n FROM pg_stat_activity"
            " WHERE datname = current_database() AND query LIKE 'LISTEN tickwheel%%'"
        )
        return int(row["n"])


# -- the journal the handlers write ---------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    event: str
    execution_id: str
    attempt: int
    token: int
    pid: int
    mono: float
    real: float


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path

    def records(self) -> list[Record]:
        if not self.path.exists():
            return []
        out: list[Record] = []
        for line in self.path.read_text().splitlines():
            raw = json.loads(line)
            out.append(Record(**{k: raw[k] for k in Record.__dataclass_fields__}))
        return out

    def of(self, execution_id: uuid.UUID, event: str | None = None) -> list[Record]:
        key = str(execution_id)
        return [
            r
            for r in self.records()
            if r.execution_id == key and (event is None or r.event == event)
        ]


# -- processes ------------------------------------------------------------------------------------


@dataclass
class Proc:
    name: str
    args: list[str]
    popen: subprocess.Popen[bytes]
    stdout_path: Path
    stderr_path: Path
    stopped: bool = False  # SIGSTOPped and not SIGCONTinued since

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def send(self, sig: signal.Signals) -> None:
        """A real signal to the real process."""
        os.kill(self.pid, sig)
        if sig == signal.SIGSTOP:
            self.stopped = True
        elif sig == signal.SIGCONT:
            self.stopped = False

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def output(self, tail: int = 4000) -> str:
        out = self.stdout_path.read_text(errors="replace")[-tail:]
        err = self.stderr()[-tail:]
        code = self.popen.poll()
        state = "running" if code is None else f"exit {code}"
        return f"== {self.name} (pid {self.pid}, {state}): {' '.join(self.args)}\n{out}{err}"

    def kill(self) -> None:
        if self.popen.poll() is None:
            if self.stopped:
                os.kill(self.pid, signal.SIGCONT)  # a stopped process must run to die cleanly
            self.popen.kill()
        self.popen.wait(timeout=STOP_TIMEOUT)


@dataclass
class Cluster:
    """The processes of one test, all pointed at one database."""

    url: str
    directory: Path
    db: Db
    procs: list[Proc] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.jobs_dir = self.directory / "jobs"
        self.jobs_dir.mkdir()
        shutil.copyfile(JOBS_SOURCE, self.jobs_dir / f"{JOBS_MODULE}.py")
        self.journal = Journal(self.directory / "journal.jsonl")
        self.env = clean_env(TW_PROCESS_JOURNAL=str(self.journal.path))

    def _start(self, name: str, args: list[str]) -> Proc:
        n = sum(1 for p in self.procs if p.name == name)
        stem = self.directory / f"{name}.{n}"
        stdout_path, stderr_path = stem.with_suffix(".stdout"), stem.with_suffix(".stderr")
        full = [str(TICKWHEEL), *args, "--database-url", self.url]
        with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
            popen = subprocess.Popen(
                full,
                cwd=self.directory,
                env=self.env,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
            )
        proc = Proc(name, full, popen, stdout_path, stderr_path)
        self.procs.append(proc)
        return proc

    def scheduler(self) -> Proc:
        return self._start("scheduler", ["scheduler"])

    def worker(
        self,
        worker_id: str,
        *,
        concurrency: int = 4,
        lease: float = 2.0,
        grace: float | None = None,
        definitions: Path | None = None,
        with_scheduler: bool = False,
    ) -> Proc:
        """``with_scheduler``: the worker also runs a scheduler (``--with-scheduler``)."""
        args = ["worker", "--worker-id", worker_id, "--concurrency", str(concurrency)]
        args += ["--lease", str(lease), "--path", str(self.jobs_dir)]
        if grace is not None:
            args += ["--grace", str(grace)]
        if definitions is not None:
            args += ["--definitions", str(definitions)]
        if with_scheduler:
            args.append("--with-scheduler")
        return self._start(worker_id, args)

    def wait_listening(self, count: int, timeout: float = 30.0) -> None:
        """Until ``count`` processes wait for wake-up signals: started and idle, so that an
        execution submitted now is promoted and claimed without polling delays."""
        self.eventually(lambda: self.db.listeners() >= count, timeout, f"{count} listeners")

    def eventually(self, probe: Callable[[], T | None], timeout: float, what: str) -> T:
        """Polls ``probe`` until it returns something truthy (returned) or ``timeout`` seconds
        pass (the test fails with every process's output). Waiting for real processes needs a
        bounded poll; no assertion ever rests on a bare sleep."""
        deadline = time.monotonic() + timeout
        while True:
            got = probe()
            if got:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout:g} s waiting for {what}\n"
                    f"status counts: {self.db.status_counts()}\n{self.output()}"
                )
            time.sleep(POLL)

    def wait_status(
        self, execution_id: uuid.UUID, statuses: str | set[str], timeout: float
    ) -> DictRow:
        wanted = {statuses} if isinstance(statuses, str) else statuses

        def probe() -> DictRow | None:
            row = self.db.execution(execution_id)
            return row if row["status"] in wanted else None

        return self.eventually(probe, timeout, f"execution {execution_id} in {sorted(wanted)}")

    def wait_started(self, execution_id: uuid.UUID, proc: Proc, timeout: float = 20.0) -> Record:
        """Until ``proc``'s handler has recorded the start of an attempt of the execution."""

        def probe() -> Record | None:
            found = [r for r in self.journal.of(execution_id, "start") if r.pid == proc.pid]
            return found[-1] if found else None

        return self.eventually(probe, timeout, f"{proc.name} to start {execution_id}")

    def output(self) -> str:
        return "\n".join(p.output() for p in self.procs)

    def close(self) -> None:
        for proc in self.procs:
            proc.kill()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def cluster(db_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    db = Db(db_url)
    c = Cluster(db_url, tmp_path, db)
    try:
        yield c
    finally:
        c.close()
        db.close()
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            print(f"\n---- process output ({tmp_path}) ----\n{c.output()}")


# -- definitions and submissions, through the store and the in-process transport ------------------


def job_doc(
    name: str,
    function: str,
    *,
    inputs: dict[str, Any] | None = None,
    outputs: dict[str, Any] | None = None,
    timeout: float = 60,
    max_attempts: int = 3,
) -> dict[str, Any]:
    """A python definition of ``tw_process_jobs:<function>`` with a short retry backoff."""
    return {
        "name": name,
        "version": 1,
        "inputs": inputs or {},
        "outputs": outputs or {},
        "execution": {"type": "python", "entrypoint": f"{JOBS_MODULE}:{function}"},
        "timeout": timeout,
        "retry": {"maxAttempts": max_attempts, "baseDelay": 0.1, "maxDelay": 0.2},
    }


def slow_doc(*, max_attempts: int = 3, function: str = "slow") -> dict[str, Any]:
    """``slow(seconds)``: returns the pid of the worker that ran it and its fencing token."""
    return job_doc(
        "slow",
        function,
        inputs={"seconds": "number"},
        outputs={"pid": "integer", "token": "integer"},
        max_attempts=max_attempts,
    )


def run(coro_fn: Callable[[InProcessTransport], Any], url: str) -> Any:
    async def main() -> Any:
        store = await open_store(url, pool_size=2)
        try:
            return await coro_fn(InProcessTransport(store, TENANT))
        finally:
            await store.close()

    return asyncio.run(main())


def register(url: str, *docs: dict[str, Any]) -> None:
    async def work(transport: InProcessTransport) -> None:
        for doc in docs:
            await transport.apply_definition(definition_from_document(doc))

    run(work, url)


def submit(
    url: str,
    name: str,
    count: int = 1,
    *,
    inputs: dict[str, Any] | None = None,
    execute_at: datetime | None = None,
    chunk: int = 1000,
) -> list[uuid.UUID]:
    """``count`` executions of ``name`` through ``submit_many``, ``chunk`` per call."""
    request = SubmitRequest(f"registry://jobs/{name}", inputs=inputs or {}, execute_at=execute_at)

    async def work(transport: InProcessTransport) -> list[uuid.UUID]:
        ids: list[uuid.UUID] = []
        for start in range(0, count, chunk):
            n = min(chunk, count - start)
            for item in await transport.submit_many([request] * n):
                assert item["status"] == 201, item
                ids.append(uuid.UUID(str(item["execution"]["executionId"])))
        return ids

    ids: list[uuid.UUID] = run(work, url)
    return ids
