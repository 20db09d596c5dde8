"""The state machine's other copies kept in step with ``domain/states.py``: the diagrams of
docs/state_machine.md, the store's status-writing queries (each one is exercised by
test_state_machine.py) and the public error names (only errors tickwheel raises or catches)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

import pytest

import tickwheel
from tests.store.test_state_machine import TRANSITIONS
from tickwheel.domain.states import ATTEMPT_TRANSITIONS, EXECUTION_TRANSITIONS
from tickwheel.store.sqlfile import load_queries

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "state_machine.md"
SRC = ROOT / "src" / "tickwheel"

_BLOCK = re.compile(r"^## (\w+)\n\n```mermaid\n(.*?)```", re.M | re.S)
_EDGE = re.compile(r"^\s*(\w+|\[\*\])\s*-->\s*(\w+|\[\*\])\s*(?::.*)?$", re.M)


def diagram_edges(title: str) -> set[tuple[str, str]]:
    """The edges between states of the diagram under ``## title`` (start and end left out)."""
    blocks = dict(_BLOCK.findall(DOC.read_text("utf-8")))
    edges = _EDGE.findall(blocks[title])
    assert edges, f"no edges found in the {title} diagram"
    return {(a, b) for a, b in edges if "[*]" not in (a, b)}


Status = TypeVar("Status", bound=StrEnum)


def table_edges(table: Mapping[Status, frozenset[Status]]) -> set[tuple[str, str]]:
    return {(str(s), str(t)) for s, targets in table.items() for t in targets}


def test_the_execution_diagram_draws_exactly_the_table() -> None:
    assert diagram_edges("Execution") == table_edges(EXECUTION_TRANSITIONS)


def test_the_attempt_diagram_draws_exactly_the_table() -> None:
    assert diagram_edges("Attempt") == table_edges(ATTEMPT_TRANSITIONS)


QUERY_METHODS: dict[str, set[str]] = {
    # An insert starts the machine ([*] -> SCHEDULED or READY); it is not an edge of the table.
    "execution_insert": {"execution_insert_many"},
    "execution_insert_one": {"execution_insert_many"},
    "execution_promote_ids": {"execution_promote_ids", "execution_promote_ids_leased"},
    "execution_promote_ids_fenced": {"execution_promote_ids_leased"},
    "execution_promote_scheduled": {"execution_promote_due", "execution_promote_due_leased"},
    "execution_promote_retries": {"execution_promote_due", "execution_promote_due_leased"},
    "execution_claim_ready": {"execution_claim_ready"},
    "execution_claim_ready_unlimited": {"execution_claim_ready"},
    "execution_claim_ready_fair": {"execution_claim_ready"},
    "execution_claim_direct": {"execution_claim_ready"},
    "execution_claim_ready_direct": {"execution_claim_ready"},
    "execution_claim_ordered": {"execution_claim_ready"},
    "execution_claim_ready_ordered": {"execution_claim_ready"},
    "attempt_insert": {"execution_claim_ready"},
    "execution_finish_many": {"attempt_finish", "attempt_finish_many"},
    "attempt_finish": {
        "attempt_finish",
        "attempt_finish_many",
        "execution_release",
        "execution_snooze",
    },
    "execution_reap_batch": {"execution_reap"},
    "attempt_reap_batch": {"execution_reap"},
    "execution_release": {"execution_release"},
    "execution_snooze": {"execution_snooze"},
    "execution_cancel": {"execution_cancel"},
    "execution_cancel_unstarted": {"execution_cancel_unstarted"},
    "execution_replay": {"execution_replay"},
    "execution_expire_due": {"execution_expire_due"},
    "execution_expire_one": {"execution_expire_due"},
    "execution_expire_claimed": {"execution_expire_claimed"},
    "attempt_abandon": {"execution_expire_claimed"},
}
"""Every named query that writes an execution's or an attempt's status, and the store methods
that run it: a new one fails here until its method is listed in test_state_machine.TRANSITIONS."""

_WRITES_STATUS = re.compile(
    r"UPDATE\s+(?:executions|attempts)\b(?:\s+\w+)?\s+SET\s+(?:[^;]*?,\s*)?status\s*="
    r"|INSERT\s+INTO\s+(?:executions|attempts)\b",
    re.S | re.I,
)


@pytest.mark.parametrize("dialect", ["postgres", "sqlite"])
def test_every_status_writing_query_belongs_to_a_listed_transition(dialect: str) -> None:
    queries = load_queries(f"tickwheel.store.{dialect}.sql")
    writers = {name for name, sql in queries.items() if _WRITES_STATUS.search(sql)}
    assert writers - set(QUERY_METHODS) == set(), "list the new query and its store method"
    listed = {t.method for t in TRANSITIONS} | {"execution_insert_many"}
    for name in writers:
        assert QUERY_METHODS[name] <= listed, name


def _mentions_outside_its_definition(name: str) -> bool:
    word = re.compile(rf"\b{name}\b")
    for path in SRC.rglob("*.py"):
        if path.name == "__init__.py" and path.parent == SRC:
            continue
        if path == SRC / "domain" / "errors.py":
            continue
        if word.search(path.read_text("utf-8")):
            return True
    return False


def test_every_public_error_is_raised_or_caught_by_tickwheel() -> None:
    """A public error name is a promise that a caller may meet it. StaleFencingToken was one
    that nothing raised: a stale write is refused by its row count (False, or left out of a
    batch), and the worker drops the result, logs it and counts it (docs/state_machine.md)."""
    errors = [
        value
        for name in tickwheel.__all__
        if isinstance(value := getattr(tickwheel, name), type) and issubclass(value, Exception)
    ]
    used = {e for e in errors if _mentions_outside_its_definition(e.__name__)}
    # A base class is kept for what it catches: the errors used below it.
    used |= {e for e in errors if any(issubclass(u, e) for u in used)}
    assert [e.__name__ for e in errors if e not in used] == []
    assert "StaleFencingToken" not in tickwheel.__all__
