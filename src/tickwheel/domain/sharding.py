"""Shard and bucket of an execution, both fixed at insert (DESIGN.md)."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime

SHARD_COUNT = 1024


def shard_id(execution_id: uuid.UUID) -> int:
    """A stable hash, not the id's low bits: UUIDv7's leading bits are time, so hashing spreads a
    burst of submissions evenly over the shards. Stored with every row: it must never change
    (``tests/unit/test_ids_and_sharding.py`` pins it)."""
    return shard_of_int(execution_id.int)


def shard_of_int(value: int) -> int:
    """``shard_id`` of the id whose ``UUID.int`` is ``value``: the hash of its 16 bytes, big
    endian (what ``UUID.bytes`` is). A batch has the values already, so no ``UUID`` is read."""
    digest = _blake2b(value.to_bytes(16, "big"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % SHARD_COUNT


_blake2b = hashlib.blake2b


def bucket_start(execute_at: datetime) -> datetime:
    """The UTC minute of the instant (converted first: an offset may carry seconds)."""
    return execute_at.astimezone(UTC).replace(second=0, microsecond=0)
