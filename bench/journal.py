"""The start journal: every benchmark handler, of tickwheel and of the peers alike, appends one
line ``<key> <time.time()>`` when it starts, so that start times and lateness are measured the
same way for all three systems (the wall clock of one machine, read in the handler itself).

One ``write`` of a short line to a file opened with O_APPEND is atomic, so any number of
processes and threads can share one journal file without locks."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

JOURNAL_ENV = "BENCH_JOURNAL"

_fd: int | None = None
_fd_pid: int | None = None


def record(key: str) -> None:
    """Called first thing by a handler. The file is opened once per process (again after a
    fork: Celery's prefork children inherit the module state of their parent)."""
    global _fd, _fd_pid
    now = time.time()
    if _fd is None or _fd_pid != os.getpid():
        _fd = os.open(os.environ[JOURNAL_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        _fd_pid = os.getpid()
    os.write(_fd, f"{key} {now:.6f}\n".encode())


def read(path: Path) -> dict[str, list[float]]:
    """Start times by key (a key started twice, a redelivery, has two)."""
    starts: dict[str, list[float]] = {}
    if not path.exists():
        return starts
    for line in _lines(path):
        key, _, at = line.partition(" ")
        if at:
            starts.setdefault(key, []).append(float(at))
    return starts


class Counter:
    """Lines written so far, reading only what was appended since the last call: cheap enough
    to poll ten times a second while the systems run (a count query on a table holding a
    backlog of millions is not)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.lines = 0

    def __call__(self) -> int:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return 0
        # Only up to the last newline: a line being written is counted next time.
        complete = chunk.rfind(b"\n") + 1
        self.lines += chunk.count(b"\n", 0, complete)
        self.offset += complete
        return self.lines


def _lines(path: Path) -> Iterable[str]:
    with path.open() as f:
        for line in f:
            if line.endswith("\n"):  # a line being written right now is left for later
                yield line.rstrip("\n")
