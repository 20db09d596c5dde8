"""Structured logs: JSON lines for machines, plain lines for people.

Every line about an execution carries ``execution_id``, ``attempt``, ``fencing_token`` and
``worker_id``, so that one grep (or one log query) follows an execution across processes and
retries. They come from a log call's ``extra`` or, for code that does not know the execution
(a runner's helper, a library), from the attempt's context: the worker binds the fields in the
task that runs the attempt, and every record logged from that task, or from tasks it starts,
gets them."""

from __future__ import annotations

import json
import logging
import os
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, TextIO

from tickwheel.domain.models import Execution

EXECUTION_FIELDS = ("execution_id", "attempt", "fencing_token", "worker_id")
FORMAT_ENV = "TICKWHEEL_LOG_FORMAT"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_bound: ContextVar[dict[str, Any] | _Execution | None] = ContextVar(
    "tickwheel_log_fields", default=None
)
# What every LogRecord has; anything else on a record came from ``extra``.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def execution_fields(execution: Execution, worker_id: str | None) -> dict[str, Any]:
    """The ``extra`` of a log call about ``execution`` (its current attempt and token)."""
    return {
        "execution_id": str(execution.execution_id),
        "attempt": execution.attempt_count,
        "fencing_token": execution.fencing_token,
        "worker_id": worker_id,
    }


def bind(fields: dict[str, Any]) -> None:
    """Attaches ``fields`` to every record logged from now on in this task (and the tasks it
    creates after this call). A task runs in a copy of its creator's context, so binding in an
    attempt's task never leaks into the worker's loop or into other attempts."""
    _bound.set({**_bound_fields(), **fields})


def bind_execution(execution: Execution, worker_id: str | None) -> None:
    """``bind(execution_fields(execution, worker_id))``, with the fields made only when a
    record is logged: a worker binds them for every attempt, and most attempts log nothing."""
    _bound.set(_Execution(_bound.get(), execution, worker_id))


class _Execution:
    """Fields bound by ``bind_execution``, over those bound before it."""

    __slots__ = ("execution", "fields", "under", "worker_id")

    def __init__(
        self, under: dict[str, Any] | _Execution | None, execution: Execution, worker_id: str | None
    ) -> None:
        self.under = under
        self.execution = execution
        self.worker_id = worker_id
        self.fields: dict[str, Any] | None = None

    def resolve(self) -> dict[str, Any]:
        if self.fields is None:
            under = self.under.resolve() if isinstance(self.under, _Execution) else self.under
            self.fields = {**(under or {}), **execution_fields(self.execution, self.worker_id)}
        return self.fields


def _bound_fields() -> dict[str, Any]:
    bound = _bound.get()
    if isinstance(bound, _Execution):
        return bound.resolve()
    return bound or {}


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The extra fields of ``record``: its own ``extra`` first, then the bound ones."""
    fields = {k: v for k, v in _bound_fields().items() if v is not None}
    for key, value in vars(record).items():
        if key not in _STANDARD and not key.startswith("_") and value is not None:
            fields[key] = value
    return fields


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, then the extra
    fields (the execution's first), then ``exception`` with the traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = record_fields(record)
        for key in EXECUTION_FIELDS:
            if key in fields:
                line[key] = fields.pop(key)
        line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """The classic line, followed by ``key=value`` for each extra field."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = record_fields(record)
        if not fields:
            return text
        first, _, rest = text.partition("\n")
        pairs = " ".join(f"{k}={v}" for k, v in fields.items())
        return f"{first} [{pairs}]" + (f"\n{rest}" if rest else "")


def wants_json(json_lines: bool | None = None, stream: TextIO | None = None) -> bool:
    """Explicit choice first, then ``TICKWHEEL_LOG_FORMAT=json|text``, then: JSON unless
    ``stream`` (stderr) is a terminal, where a person is reading. (Another value of the
    variable counts as unset; ``configure_logging`` warns about it.)"""
    if json_lines is not None:
        return json_lines
    chosen = os.environ.get(FORMAT_ENV, "").strip().lower()
    if chosen in ("json", "text"):
        return chosen == "json"
    target = stream if stream is not None else sys.stderr
    return not (hasattr(target, "isatty") and target.isatty())


def configure_logging(
    level: str | int = "INFO", json: bool | None = None, stream: TextIO | None = None
) -> logging.Handler:
    """Replaces the root logger's handlers with one on ``stream`` (stderr) in the chosen
    format; the CLI's process entry points call it instead of ``logging.basicConfig``."""
    target = stream if stream is not None else sys.stderr
    handler = logging.StreamHandler(target)
    handler.setFormatter(JsonFormatter() if wants_json(json, target) else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    chosen = os.environ.get(FORMAT_ENV, "").strip().lower()
    if json is None and chosen not in ("", "json", "text"):
        logging.getLogger("tickwheel").warning(
            "%s=%r is neither 'json' nor 'text': ignored", FORMAT_ENV, chosen
        )
    return handler
