"""The due window's ``slices`` parameter spells each instant and id once however many slices
share them: the same JSON as one spelling per slice, for a start's window (a slice per shard
with one pair of instants) and for hint slivers and pages (instants and ids of their own)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone

from tickwheel.domain.sharding import bucket_start
from tickwheel.store.due import DueSlice
from tickwheel.store.postgres.promotion import due_slices_json

T = datetime(2026, 3, 1, 12, 0, 59, 999_999, tzinfo=UTC)


def spelled_one_by_one(slices: list[DueSlice]) -> list[list[object]]:
    return [
        [
            c.shard_id,
            c.after_at.isoformat(),
            str(c.after_id),
            bucket_start(c.after_at).isoformat(),
            c.until.isoformat(),
        ]
        for c in slices
    ]


def test_shared_and_own_instants_are_spelled_as_before() -> None:
    window = [DueSlice(shard, T, T + timedelta(seconds=30)) for shard in range(1024)]
    slivers = [
        DueSlice(shard, T + timedelta(milliseconds=ms), T + timedelta(milliseconds=ms + 1))
        for shard, ms in ((3, 5), (3, 6), (9, 5))
    ]
    offset = timezone(timedelta(hours=2))
    page = DueSlice(7, T.astimezone(offset), T + timedelta(seconds=30), uuid.uuid4())
    slices = [*window, *slivers, page]
    assert json.loads(due_slices_json(slices)) == spelled_one_by_one(slices)
