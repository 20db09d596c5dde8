"""A batch's items made together: their ids drawn at once, and the items of requests that differ
from one already prepared by their idempotency key alone made from it.

A batch is most often one definition submitted many times under as many keys (the SDK's
``submit_many``, the batch route, a cron's occurrences). For such a request every field of its
item but the id, the shard and the key is what the item of the previous one of that shape was:
the URI, version and priority are the same, nothing else is given, and what the definition
adds (its inputs' defaults, its concurrency, its limits) and what the batch gives (its instant,
its trace) are the same for every item. Checking and preparing each one again cost most of
what the submitting process spent per item. ``PlainRun`` takes the first item of such a run as
it was prepared (checked, its fingerprint taken) and makes the others from it after the one
check that can differ, the key's (``tests/unit/test_batch_items.py`` holds the items equal to
``prepare_execution``'s, for every shape that may or may not take this way)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from tickwheel.domain.fast_init import fillable
from tickwheel.domain.ids import uuid7, uuid7_run, uuid_of
from tickwheel.domain.sharding import shard_id, shard_of_int
from tickwheel.domain.submission import NewExecution, SubmitRequest, plain_request

_VARYING = ("execution_id", "shard_id", "idempotency_key", "inputs")


def ids_and_shards(at: datetime, count: int) -> tuple[list[uuid.UUID], list[int]]:
    """``count`` ids for ``at`` and the shard of each: what ``count`` calls of ``uuid7(at)``
    and ``shard_id`` give, the ids' values drawn at once (``uuid7_run``)."""
    run = uuid7_run(at, count)
    if run is None:
        ids = [uuid7(at) for _ in range(count)]
        return ids, [shard_id(i) for i in ids]
    return [uuid_of(v) for v in run], [shard_of_int(v) for v in run]


class PlainRun:
    """The items of plain requests like ``first``'s (its URI as written, version and priority),
    made from ``first``'s item, which ``prepare_execution`` made for it in the same batch (same
    instant, tenant, trace and definition)."""

    __slots__ = ("fields", "priority", "uri", "version")

    @classmethod
    def of(cls, first: SubmitRequest, item: NewExecution) -> PlainRun | None:
        """The run of ``first`` (just prepared as ``item``), if it is plain and its item has no
        inputs (a definition's defaults would be one dictionary shared by every item)."""
        if type(item.inputs) is dict and not item.inputs and plain_request(first):
            return cls(first, item)
        return None

    def __init__(self, first: SubmitRequest, item: NewExecution) -> None:
        self.uri = first.definition_uri
        self.version = first.definition_version
        self.priority = first.priority
        fields: dict[str, Any] = dict(item.__dict__)
        for name in _VARYING:
            fields[name] = None
        self.fields = fields

    def make(
        self, request: SubmitRequest, execution_id: uuid.UUID, shard: int
    ) -> NewExecution | None:
        """``request``'s item, or None when it is not of this run (then it takes the whole
        way, which also refuses what is wrong with it)."""
        if not (
            request.definition_uri == self.uri
            and request.definition_version == self.version
            and request.priority == self.priority
            and plain_request(request)
        ):
            return None
        made: NewExecution = _new(NewExecution)
        # Filled as ``fast_init.filled`` does, but into the instance's own dictionary: setting
        # ``__dict__`` costs more than copying the run's fields into it.
        fields = made.__dict__
        fields.update(self.fields)
        fields["execution_id"] = execution_id
        fields["shard_id"] = shard
        fields["idempotency_key"] = request.idempotency_key
        fields["inputs"] = {}  # each item's own, as prepare_execution makes it
        return made


_new = object.__new__
fillable(NewExecution)
