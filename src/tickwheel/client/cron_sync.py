"""``Client.cron``: the blocking twin of ``CronClient``, with the same signatures, each method
running its async twin on the sync client's loop."""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Coroutine
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tickwheel.client.cron import (
    UNSET,
    CronClient,
    CronJobInfo,
    CronJobPage,
    FireTime,
    Misfire,
    OccurrencePage,
    Opt,
    Overlap,
)
from tickwheel.client.cron_wire import Wire

T = TypeVar("T")


class Run(Protocol):
    """Runs a coroutine to its end on the client's loop (``Client._run``)."""

    def __call__(self, coro: Coroutine[Any, Any, T]) -> T: ...


class CronSync:
    """``Client.cron``: each method runs its ``CronClient`` twin on the client's loop."""

    def __init__(self, run: Run, inner: CronClient) -> None:
        self._run, self._inner = run, inner

    def create(
        self,
        name: str,
        definition: str | None,
        expression: str,
        timezone: str = "UTC",
        inputs: dict[str, Any] | None = None,
        *,
        definition_version: Opt[int | None] = UNSET,
        workflow: Opt[str | None] = UNSET,
        workflow_version: Opt[int | None] = UNSET,
        dst_policy: Opt[dict[str, str] | None] = UNSET,
        misfire_policy: Opt[Misfire | None] = UNSET,
        max_catch_up: Opt[int | None] = UNSET,
        overlap_policy: Opt[Overlap | None] = UNSET,
        jitter: Opt[int | None] = UNSET,
        start_at: Opt[datetime | None] = UNSET,
        end_at: Opt[datetime | None] = UNSET,
    ) -> CronJobInfo:
        return self._run(
            self._inner.create(
                name,
                definition,
                expression,
                timezone,
                inputs,
                definition_version=definition_version,
                workflow=workflow,
                workflow_version=workflow_version,
                dst_policy=dst_policy,
                misfire_policy=misfire_policy,
                max_catch_up=max_catch_up,
                overlap_policy=overlap_policy,
                jitter=jitter,
                start_at=start_at,
                end_at=end_at,
            )
        )

    def list(self, cursor: str | None = None, limit: int = 50) -> CronJobPage:
        return self._run(self._inner.list(cursor, limit))

    def get(self, ref: str | uuid.UUID) -> CronJobInfo:
        return self._run(self._inner.get(ref))

    def update(
        self,
        ref: str | uuid.UUID,
        *,
        version: int | None = None,
        name: Opt[str] = UNSET,
        definition: Opt[str | None] = UNSET,
        expression: Opt[str] = UNSET,
        timezone: Opt[str] = UNSET,
        inputs: Opt[dict[str, Any]] = UNSET,
        definition_version: Opt[int | None] = UNSET,
        workflow: Opt[str | None] = UNSET,
        workflow_version: Opt[int | None] = UNSET,
        dst_policy: Opt[dict[str, str] | None] = UNSET,
        misfire_policy: Opt[Misfire | None] = UNSET,
        max_catch_up: Opt[int | None] = UNSET,
        overlap_policy: Opt[Overlap | None] = UNSET,
        jitter: Opt[int | None] = UNSET,
        start_at: Opt[datetime | None] = UNSET,
        end_at: Opt[datetime | None] = UNSET,
    ) -> CronJobInfo:
        return self._run(
            self._inner.update(
                ref,
                version=version,
                name=name,
                definition=definition,
                expression=expression,
                timezone=timezone,
                inputs=inputs,
                definition_version=definition_version,
                workflow=workflow,
                workflow_version=workflow_version,
                dst_policy=dst_policy,
                misfire_policy=misfire_policy,
                max_catch_up=max_catch_up,
                overlap_policy=overlap_policy,
                jitter=jitter,
                start_at=start_at,
                end_at=end_at,
            )
        )

    def pause(self, ref: str | uuid.UUID) -> CronJobInfo:
        return self._run(self._inner.pause(ref))

    def resume(self, ref: str | uuid.UUID, catch_up: bool = False) -> CronJobInfo:
        return self._run(self._inner.resume(ref, catch_up))

    def delete(self, ref: str | uuid.UUID, version: int | None = None) -> Wire:
        return self._run(self._inner.delete(ref, version))

    def history(
        self, ref: str | uuid.UUID, cursor: str | None = None, limit: int = 50
    ) -> OccurrencePage:
        return self._run(self._inner.history(ref, cursor, limit))

    def audit(self, ref: str | uuid.UUID) -> builtins.list[Wire]:
        return self._run(self._inner.audit(ref))

    def preview(
        self,
        expression: str,
        timezone: str = "UTC",
        after: datetime | None = None,
        count: int = 10,
        dst_policy: dict[str, Any] | None = None,
    ) -> builtins.list[FireTime]:
        return self._run(self._inner.preview(expression, timezone, after, count, dst_policy))

    def apply(
        self,
        jobs: builtins.list[Any] | str | Path,
        *,
        prune: bool = False,
        dry_run: bool = False,
        label: str | None = None,
        idempotency_key: str | None = None,
    ) -> Wire:
        return self._run(
            self._inner.apply(
                jobs, prune=prune, dry_run=dry_run, label=label, idempotency_key=idempotency_key
            )
        )

    def trigger(self, ref: str | uuid.UUID, key: str | None = None) -> Wire:
        return self._run(self._inner.trigger(ref, key))

    def backfill(self, ref: str | uuid.UUID, start: datetime, end: datetime) -> Wire:
        return self._run(self._inner.backfill(ref, start, end))
