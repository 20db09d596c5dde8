"""``Client.cron``: the blocking twin of ``CronClient``, each method made from its async twin
(``blocking.py``), so that the two cannot drift apart."""

from __future__ import annotations

from tickwheel.client.blocking import Facade, Run, blocking
from tickwheel.client.cron import CronClient

__all__ = ["CronSync", "Run"]


class CronSync(Facade):
    """``Client.cron``: each method runs its ``CronClient`` twin on the client's loop."""

    def __init__(self, run: Run, inner: CronClient) -> None:
        super().__init__(run, inner)

    create = blocking(CronClient.create)
    list = blocking(CronClient.list)
    get = blocking(CronClient.get)
    update = blocking(CronClient.update)
    pause = blocking(CronClient.pause)
    resume = blocking(CronClient.resume)
    delete = blocking(CronClient.delete)
    history = blocking(CronClient.history)
    audit = blocking(CronClient.audit)
    preview = blocking(CronClient.preview)
    apply = blocking(CronClient.apply)
    trigger = blocking(CronClient.trigger)
    backfill = blocking(CronClient.backfill)
