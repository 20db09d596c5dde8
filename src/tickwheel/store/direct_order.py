"""Where a store's next direct claim walks a herd in id order (docs/scaling.md, "The direct claim
in id order"), for both stores.

The direct claim took an open shard's due SCHEDULED rows shard after shard, and wrote them in
that order: a herd's rows of one shard are spread over the whole table, so each row of a claim
landed on a heap page and index leaves of its own. The ordered walk takes the herd's rows in id
(insertion) order instead, from a place in the herd that the store learns from the rows its
claims took: after the last row the walk took, or, when the walk took none, before the first
row the shard walk took (the fallback, which takes whatever the bounded walk left). A walk that
found nothing and a fallback that found nothing leave no place: the next direct claim walks the
shards only, as before.

Only a hint: the rows a claim may take are the direct claim's whatever the place (the walk's
statement tests each row as the shard walk does), so a wrong or stale place costs at most the
walk's bound in rows passed, never a row taken wrongly or twice."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class DirectOrder:
    tenant: str | None = None
    after: uuid.UUID | None = None
    """The walk takes the tenant's rows whose id is greater than this."""

    def place(self) -> tuple[str, uuid.UUID] | None:
        """The tenant and id the next walk starts after, or None: walk the shards only."""
        if self.tenant is None or self.after is None:
            return None
        return self.tenant, self.after

    def took(
        self,
        walked: Sequence[tuple[str, uuid.UUID]],
        fallback: Sequence[tuple[str, uuid.UUID]],
    ) -> DirectOrder:
        """The place after a direct claim whose ordered walk took ``walked`` and whose shard walk
        took ``fallback`` (the fallback, or the only walk when there was no place), as (tenant,
        id)."""
        if walked:
            tenant, last = max(walked, key=_id_int)
            return DirectOrder(tenant, last)
        if not fallback:
            return DirectOrder()
        # The herd's tenant is the one most of the rows belong to (a shard opened for one
        # tenant's herd may hold another's row that became due since); its first row taken is
        # where its rows not yet taken are.
        tenant = Counter(t for t, _ in fallback).most_common(1)[0][0]
        first = min(i.int for t, i in fallback if t == tenant)
        return DirectOrder(tenant, uuid.UUID(int=max(first - 1, 0)))


def _id_int(row: tuple[str, uuid.UUID]) -> int:
    return row[1].int
