"""The worker's guard (engine/deadlines.py), pure: which claims of an execution with a limit
are too late to run, judged by the instants the claim wrote with the database's clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from tests.factories import T0, new_execution
from tickwheel.domain.models import Execution
from tickwheel.engine.deadlines import TooLate, too_late
from tickwheel.store.postgres.rows import execution_from_new

S = timedelta(seconds=1)


def claimed(first: datetime, now: datetime, **limits: datetime) -> Execution:
    e = execution_from_new(new_execution())
    return replace(e, started_at=first, updated_at=now, **limits)


@pytest.mark.parametrize(
    ("first", "now", "limits", "expected"),
    [
        (T0, T0, {}, None),
        (T0 + 5 * S, T0 + 5 * S, {"start_by": T0 + 10 * S}, None),
        (T0 + 11 * S, T0 + 11 * S, {"start_by": T0 + 10 * S}, TooLate.EXPIRED),
        # The first claim was late and its worker died: the reaper's retry is still EXPIRED.
        (T0 + 11 * S, T0 + 60 * S, {"start_by": T0 + 10 * S}, TooLate.EXPIRED),
        # Started in time; a retry claimed after startBy runs (startBy bounds the first start).
        (T0 + 5 * S, T0 + 60 * S, {"start_by": T0 + 10 * S}, None),
        (T0 + 5 * S, T0 + 29 * S, {"deadline": T0 + 30 * S}, None),
        (T0 + 5 * S, T0 + 31 * S, {"deadline": T0 + 30 * S}, TooLate.DEADLINE),
        (T0 + 31 * S, T0 + 31 * S, {"deadline": T0 + 30 * S}, TooLate.EXPIRED),
    ],
)
def test_too_late(
    first: datetime, now: datetime, limits: dict[str, datetime], expected: TooLate | None
) -> None:
    assert too_late(claimed(first, now, **limits)) is expected
