"""The Celery app of B5 (``celery -A bench.jobs_celery worker``), on the Redis broker of
``BENCH_CELERY_BROKER`` with every key under the run's own prefix (``BENCH_CELERY_PREFIX``), so
that a run never touches anything else stored in that Redis and leaves nothing behind.

Settings chosen to match tickwheel's guarantees rather than Celery's fastest mode:
``task_acks_late`` (a message is acknowledged after the task ran, so a worker that dies
mid-task has it redelivered: at least once, like tickwheel) and no result backend (tickwheel's
no-op returns nothing worth storing either; the journal records each start)."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery

from bench.journal import record

BROKER_ENV = "BENCH_CELERY_BROKER"
PREFIX_ENV = "BENCH_CELERY_PREFIX"
QUEUE = "bench"


def make_app(broker: str, prefix: str) -> Celery:
    """A new app per run in the benchmark's process (a fresh connection pool on the run's
    prefix); ``shared=False`` keeps each app's ``noop`` its own, not one task for every app."""
    app = Celery("bench", broker=broker, set_as_current=False)
    app.conf.update(
        task_acks_late=True,
        task_ignore_result=True,
        task_default_queue=QUEUE,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        # An ETA task is held by the worker until its time; it must not be redelivered to
        # another worker meanwhile (the visibility timeout counts from delivery).
        broker_transport_options={"global_keyprefix": prefix, "visibility_timeout": 7200},
    )

    @app.task(name="noop", bind=True, shared=False)  # type: ignore[untyped-decorator]
    def noop(self: Any) -> None:
        record(f"c{self.request.id}")

    return app


app = make_app(
    os.environ.get(BROKER_ENV, "redis://127.0.0.1:6379/0"), os.environ.get(PREFIX_ENV, "bench:")
)
