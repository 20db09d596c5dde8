"""The rules of running work, without a store: Snooze's bounds, progress and checkpoint checks,
the attempt state a heartbeat takes from, and Retry-After read as a snooze."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tickwheel import Cancelled, Snooze
from tickwheel.domain.running import CHECKPOINT_LIMIT, MAX_SNOOZE, checkpoint_value, progress_value
from tickwheel.engine.runners.attempt_state import AttemptState
from tickwheel.engine.runners.base import RunOutcome, returned
from tickwheel.engine.runners.retry_after import retry_after

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("seconds", [0, -1, float("nan"), float("inf"), MAX_SNOOZE + 1, True, "5"])
def test_a_snooze_needs_a_positive_bounded_number(seconds: object) -> None:
    with pytest.raises(ValueError, match="Snooze"):
        Snooze(seconds)  # type: ignore[arg-type]


def test_a_returned_snooze_is_an_outcome_that_is_no_failure() -> None:
    outcome = returned(Snooze(90, "busy"), "m:f")
    assert outcome == RunOutcome(ok=False, snooze=90.0, message="busy")
    assert outcome.kind is None
    with pytest.raises(ValueError):
        RunOutcome(ok=False, snooze=MAX_SNOOZE * 2)


def test_progress_is_a_fraction_with_a_short_message() -> None:
    assert progress_value(0.42, "copied", NOW) == {
        "fraction": 0.42,
        "message": "copied",
        "at": NOW.isoformat(),
    }
    assert len(progress_value(1, "x" * 900, NOW)["message"]) == 500
    for bad in (1.5, -0.1, float("nan"), "half"):
        with pytest.raises(ValueError, match="progress"):
            progress_value(bad, "", NOW)  # type: ignore[arg-type]


def test_a_checkpoint_is_small_json() -> None:
    assert checkpoint_value({"row": 1}) == {"row": 1}
    with pytest.raises(ValueError, match=f"at most {CHECKPOINT_LIMIT} bytes"):
        checkpoint_value({"rows": "x" * CHECKPOINT_LIMIT})
    with pytest.raises(ValueError, match="must be JSON"):
        checkpoint_value({"at": NOW})
    with pytest.raises(ValueError, match="cannot be null"):
        checkpoint_value(None)


def test_reports_wait_for_the_next_heartbeat_coalesced() -> None:
    state = AttemptState({"row": 1}, now=lambda: NOW)
    assert not state.has_pending
    for row in range(2, 100):  # many calls, one write: the latest of each
        state.progress(row / 100, f"row {row}")
        state.save_checkpoint({"row": row})
    assert state.checkpoint == {"row": 99}
    pending = state.take()
    assert pending.progress is not None and pending.progress["message"] == "row 99"
    assert pending.checkpoint == {"row": 99} and not state.has_pending
    # A failed write gives its values back, unless newer ones came meanwhile.
    state.progress(1.0, "done")
    state.give_back(pending)
    again = state.take()
    assert again.progress is not None and again.progress["message"] == "done"
    assert again.checkpoint == {"row": 99}


def test_after_a_cancel_reports_raise_cancelled() -> None:
    state = AttemptState()
    state.cancel()
    with pytest.raises(Cancelled):
        state.progress(0.5)
    with pytest.raises(Cancelled):
        state.save_checkpoint([1])
    assert state.take().checkpoint == [1]  # kept all the same


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "86400"}, 300.0),
        ({"retry-after": "0"}, 0.001),
        (
            {
                "retry-after": "Sun, 01 Mar 2026 12:02:00 GMT",
                "date": "Sun, 01 Mar 2026 12:00:00 GMT",
            },
            120.0,
        ),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_in_seconds_or_as_a_date_bounded(
    headers: dict[str, str], expected: float | None
) -> None:
    assert retry_after(headers, 300.0) == expected


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"cursor": "\ud800"}, "lone surrogate"),
        ({"cursor": "a\x00b"}, "NUL"),
        ({"offset": 2**70}, "64-bit"),
        ({"k\x00": 1}, "NUL"),
    ],
)
def test_a_checkpoint_the_store_cannot_keep_is_refused_at_the_call(
    value: object, words: str
) -> None:
    """Refused where the handler calls, not at the heartbeat's write: PostgreSQL rejects NUL and
    lone surrogates in jsonb, and every later beat of the attempt would fail the same way."""
    with pytest.raises(ValueError, match=words):
        checkpoint_value(value)


@pytest.mark.parametrize("message", ["copied \x00 rows", "half \udfff done"])
def test_a_progress_message_the_store_cannot_keep_is_refused(message: str) -> None:
    with pytest.raises(ValueError, match="progress message"):
        progress_value(0.5, message, NOW)
