"""The cron API over HTTP: mixed into ``HttpTransport``, using its retries and error mapping.

A retried create is safe (the same job again is a 200); a retried pause or resume finds the
state the first try produced, which is the answer either way; PATCH and DELETE carry the
version when the caller gives one, so a retry after a lost response gets a clear 409. An apply
carries an idempotency key: a retry gets the first try's result, not a second apply."""

from __future__ import annotations

import builtins
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from tickwheel.client.transport import Wire
from tickwheel.domain.errors import Conflict

# The cron resources (and through them the cron domain) load with the first cron call: an
# HTTP client that reads executions never needs them.
if TYPE_CHECKING:
    from tickwheel.resources.base import Resource

APPLY_TIMEOUT = 300.0
"""Seconds one apply request may take (100,000 jobs take well under a minute)."""
APPLY_PATIENCE = 600.0
"""Seconds to keep asking for the result of an apply that is still running elsewhere."""


class HttpCronMethods:
    async def _read(
        self, model: type[Resource], method: str, path: str, **kwargs: Any
    ) -> tuple[int, Wire]:
        raise NotImplementedError  # HttpTransport's

    @staticmethod
    def _job(ref: str, tail: str = "") -> str:
        return f"/v1/cron-jobs/{quote(ref, safe='')}{tail}"

    async def cron_create(self, doc: Wire) -> tuple[Wire, bool]:
        from tickwheel.resources.cron import CronJob

        status, body = await self._read(CronJob, "POST", "/v1/cron-jobs", json=doc)
        return body, status == 201

    async def cron_list(self, cursor: str | None, limit: int) -> Wire:
        from tickwheel.resources.cron import CronJobPage

        params: dict[str, Any] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        return (await self._read(CronJobPage, "GET", "/v1/cron-jobs", params=params))[1]

    async def cron_get(self, ref: str) -> Wire:
        from tickwheel.resources.cron import CronJob

        return (await self._read(CronJob, "GET", self._job(ref)))[1]

    async def cron_update(self, ref: str, doc: Wire) -> Wire:
        from tickwheel.resources.cron import CronJob

        return (await self._read(CronJob, "PATCH", self._job(ref), json=doc))[1]

    async def cron_pause(self, ref: str) -> Wire:
        from tickwheel.resources.cron import CronJob

        return (await self._read(CronJob, "POST", self._job(ref, "/pause")))[1]

    async def cron_resume(self, ref: str, catch_up: bool) -> Wire:
        from tickwheel.resources.cron import CronJob

        body = {"catchUp": catch_up}
        return (await self._read(CronJob, "POST", self._job(ref, "/resume"), json=body))[1]

    async def cron_delete(self, ref: str, version: int | None = None) -> Wire:
        from tickwheel.resources.cron import Deleted

        params = {"version": version} if version is not None else {}
        return (await self._read(Deleted, "DELETE", self._job(ref), params=params))[1]

    async def cron_history(self, ref: str, cursor: str | None, limit: int) -> Wire:
        from tickwheel.resources.cron import OccurrencePage

        params: dict[str, Any] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        path = self._job(ref, "/executions")
        return (await self._read(OccurrencePage, "GET", path, params=params))[1]

    async def cron_audit(self, ref: str) -> Wire:
        from tickwheel.resources.cron import AuditList

        return (await self._read(AuditList, "GET", self._job(ref, "/audit")))[1]

    async def cron_preview(
        self,
        expression: str,
        timezone: str,
        after: datetime | None,
        count: int,
        dst_policy: dict[str, Any] | None = None,
    ) -> Wire:
        from tickwheel.resources.cron import Preview

        params: dict[str, Any] = {"expression": expression, "timezone": timezone, "count": count}
        if after is not None:
            params["from"] = after.isoformat()
        params.update({k: v for k, v in (dst_policy or {}).items() if v is not None})
        return (await self._read(Preview, "GET", "/v1/cron/preview", params=params))[1]

    async def cron_trigger(self, ref: str, key: str | None) -> Wire:
        from tickwheel.resources.cron import Triggered

        body = {"key": key} if key else {}
        return (await self._read(Triggered, "POST", self._job(ref, "/trigger"), json=body))[1]

    async def cron_backfill(self, ref: str, start: datetime, end: datetime) -> Wire:
        from tickwheel.resources.cron import Backfill

        body = {"from": start.isoformat(), "to": end.isoformat()}
        return (await self._read(Backfill, "POST", self._job(ref, "/backfill"), json=body))[1]

    async def cron_apply(
        self,
        docs: builtins.list[Any],
        prune: bool,
        dry_run: bool,
        label: str | None = None,
        apply_key: str | None = None,
    ) -> Wire:
        """A large apply takes longer than other calls: a longer timeout, and the same key on
        every try, so that a retry after a timeout returns the first try's result. While the
        first try still runs the server answers 409 ``running``: ask again, up to a limit."""
        from tickwheel.resources.cron import ApplyResult

        body: Wire = {"cronJobs": docs, "prune": prune, "dryRun": dry_run}
        if label is not None:
            body["label"] = label
        headers = {"Idempotency-Key": apply_key} if apply_key else {}
        deadline = time.monotonic() + APPLY_PATIENCE
        while True:
            try:
                _, data = await self._read(
                    ApplyResult,
                    "POST",
                    "/v1/cron-jobs/apply",
                    json=body,
                    headers=headers,
                    timeout=APPLY_TIMEOUT,
                )
                return data
            except Conflict as exc:
                running = isinstance(exc.details, dict) and exc.details.get("state") == "running"
                if not (running and apply_key) or time.monotonic() >= deadline:
                    raise
