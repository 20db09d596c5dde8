"""Prometheus metrics of one process, in a registry of its own.

A registry per process, not prometheus_client's global one: ``/metrics`` then shows exactly
tickwheel's series (no library's stray collectors), and a test can make a fresh ``Metrics`` and
read exact values instead of deltas of a shared global.

Services record where the event happens (the worker after a claim and a finish, the scheduler
after a promotion, the reaper after a reap, the in-process transport after a submission), so a
counter counts what the database accepted, never what was merely attempted. Labels stay
bounded: definitions by name, statuses and outcomes from fixed sets, HTTP routes by template."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    start_http_server,
)

from tickwheel.domain.definition_refs import stored_name

# The classic text format, which every Prometheus version scrapes; our names and labels are all
# plain ASCII, so what generate_latest writes is exactly that format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Scheduling lateness: the promise is "within a second", so resolve well below and around it.
LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# Handlers run from milliseconds to hours.
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
HTTP_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


def definition_label(definition_uri: str) -> str:
    """``registry://jobs/send-email`` -> ``send-email``: names are unique, and shorter to read."""
    return stored_name(definition_uri)


class Metrics:
    """Every tickwheel series, registered in ``registry`` (a new one unless given)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._started_cache: dict[str, tuple[Counter, Histogram]] = {}
        self._finished_cache: dict[tuple[str, str, str], tuple[Histogram, Counter | None]] = {}
        r = self.registry
        by_def = ["definition"]
        self.submitted = Counter(
            "tickwheel_executions_submitted",
            "Executions created by a submission (an idempotent repeat is not counted).",
            by_def,
            registry=r,
        )
        self.promoted = Counter(
            "tickwheel_executions_promoted",
            "Executions the scheduler moved to READY (SCHEDULED or RETRY_WAIT that came due).",
            by_def,
            registry=r,
        )
        self.fenced_shards = Counter(
            "tickwheel_promotion_fenced_shards",
            "Shards in which a scheduler's promotion was refused because its lease there was "
            "lost (a newer epoch, or expired by the database's clock).",
            registry=r,
        )
        self.fenced_executions = Counter(
            "tickwheel_promotion_fenced_executions",
            "Due executions those refusals left to the shards' new owners.",
            registry=r,
        )
        self.claimed = Counter(
            "tickwheel_executions_claimed", "Executions claimed by a worker.", by_def, registry=r
        )
        self.succeeded = Counter(
            "tickwheel_executions_succeeded", "Executions that ended SUCCEEDED.", by_def, registry=r
        )
        self.failed = Counter(
            "tickwheel_executions_failed",
            "Executions that ended FAILED (the dead letter), by a worker or the reaper.",
            by_def,
            registry=r,
        )
        self.lateness = Histogram(
            "tickwheel_scheduling_lateness_seconds",
            "First attempt's start minus executeAt.",
            by_def,
            buckets=LATENESS_BUCKETS,
            registry=r,
        )
        self.attempt_duration = Histogram(
            "tickwheel_attempt_duration_seconds",
            "Wall time of an attempt from claim to its recorded outcome.",
            ["definition", "outcome"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "tickwheel_queue_depth",
            "Executions now in each non-terminal status (exact; refreshed at scrape).",
            ["status"],
            registry=r,
        )
        self.finished_recently = Gauge(
            "tickwheel_executions_finished_recently",
            "Executions that reached each terminal status within the recent window "
            "(see tickwheel_executions_finished_window_seconds; refreshed at scrape).",
            ["status"],
            registry=r,
        )
        self.finished_window = Gauge(
            "tickwheel_executions_finished_window_seconds",
            "The window of tickwheel_executions_finished_recently.",
            registry=r,
        )
        self.workers_alive = Gauge(
            "tickwheel_workers_alive",
            "Workers whose last registry report is recent (three report intervals) and that "
            "have not stopped (refreshed at scrape).",
            registry=r,
        )
        self.oldest_ready_age = Gauge(
            "tickwheel_oldest_ready_age_seconds",
            "How long the longest-waiting READY execution has waited, over all tenants; 0 "
            "when none is READY (refreshed at scrape).",
            registry=r,
        )
        self.concurrency_waiting = Gauge(
            "tickwheel_concurrency_waiting",
            "READY executions under a concurrency limit, over all tenants: waiting for a slot "
            "of their key or for their turn (fifo) (refreshed at scrape).",
            registry=r,
        )
        self.concurrency_held = Gauge(
            "tickwheel_concurrency_slots_held",
            "Concurrency slots held now: RUNNING executions under a limit (refreshed at scrape).",
            registry=r,
        )
        self.rate_limited_waiting = Gauge(
            "tickwheel_rate_limited_waiting",
            "READY executions under a rate limit (their definition's or their tenant's), "
            "waiting for a token or for a claim (refreshed at scrape).",
            ["definition"],
            registry=r,
        )
        self.rate_limit_tokens = Gauge(
            "tickwheel_rate_limit_tokens",
            "Tokens the rate-limit buckets hold now (starts they would allow at once), summed "
            "over tenants; definition '(tenant)' for tenants' own buckets (refreshed at scrape).",
            ["definition"],
            registry=r,
        )
        self.rate_limit_empty = Gauge(
            "tickwheel_rate_limit_buckets_empty",
            "Rate-limit buckets holding less than one token: their work waits (refreshed at "
            "scrape).",
            registry=r,
        )
        self.lease_expirations = Counter(
            "tickwheel_lease_expirations",
            "RUNNING attempts the reaper found with an expired lease and recovered.",
            registry=r,
        )
        self.stale_fencing = Counter(
            "tickwheel_stale_fencing_token_rejections",
            "Worker writes refused because their fencing token was no longer current.",
            registry=r,
        )
        self.cron_occurrences = Counter(
            "tickwheel_cron_occurrences",
            "Cron occurrences by outcome (submitted, skipped_misfire, skipped_overlap, ...).",
            ["outcome"],
            registry=r,
        )
        self.workflow_events = Counter(
            "tickwheel_workflow_events",
            "Outbox rows of finished workflow executions an orchestrator consumed.",
            registry=r,
        )
        self.workflow_runs_swept = Counter(
            "tickwheel_workflow_runs_swept",
            "Stalled workflow runs (a submission lost in a crash) advanced by a sweep.",
            registry=r,
        )
        self.workflow_stale_writes = Counter(
            "tickwheel_workflow_stale_writes",
            "Workflow writes refused because the run was retried after they read it.",
            registry=r,
        )
        self.webhook_tries = Counter(
            "tickwheel_webhook_deliveries",
            "Tries of webhook deliveries by what became of them (delivered, pending, failed).",
            ["status"],
            registry=r,
        )
        self.breaker_transitions = Counter(
            "tickwheel_circuit_breaker_transitions",
            "Circuit breaker transitions by definition and the state entered (open, half_open, "
            "closed), counted by the process that made them (workers, schedulers).",
            ["definition", "to_state"],
            registry=r,
        )
        self.expirations = Counter(
            "tickwheel_executions_expired",
            "Executions that ended EXPIRED: not started by their startBy (or deadline).",
            ["definition"],
            registry=r,
        )
        self.breakers = Gauge(
            "tickwheel_circuit_breakers",
            "Circuit breakers now in each state, over all tenants and definitions (refreshed "
            "at scrape).",
            ["state"],
            registry=r,
        )
        self.pruned = Counter(
            "tickwheel_executions_pruned",
            "Terminal executions deleted by the retention pruner.",
            registry=r,
        )
        self.http_duration = Histogram(
            "tickwheel_http_request_duration_seconds",
            "API request latency by method, route template and status.",
            ["method", "route", "status"],
            buckets=HTTP_BUCKETS,
            registry=r,
        )

    # -- helpers the services call ---------------------------------------------------------------

    def started(self, definition_uri: str, attempt: int, lateness_seconds: float) -> None:
        """A claim. Lateness is observed for first attempts only: a retry's start is late by
        its backoff on purpose, which would drown the scheduler's own delay."""
        claimed, lateness = self._started_children(definition_uri)
        claimed.inc()
        if attempt == 1:
            lateness.observe(max(0.0, lateness_seconds))

    def finished(
        self, definition_uri: str, execution_status: str, attempt_outcome: str, seconds: float
    ) -> None:
        """A recorded attempt outcome and, when it ended the execution, the execution's."""
        duration, ended = self._finished_children(definition_uri, attempt_outcome, execution_status)
        duration.observe(max(0.0, seconds))
        if ended is not None:
            ended.inc()

    # A worker calls started and finished for every execution: looking the labelled children up
    # by name each time (``labels()`` validates, joins and locks) cost more than updating them.
    # Children are never removed, so a per-label cache stays valid for the registry's life.

    def _started_children(self, definition_uri: str) -> tuple[Counter, Histogram]:
        found = self._started_cache.get(definition_uri)
        if found is None:
            name = definition_label(definition_uri)
            found = self._started_cache[definition_uri] = (
                self.claimed.labels(name),
                self.lateness.labels(name),
            )
        return found

    def _finished_children(
        self, definition_uri: str, attempt_outcome: str, execution_status: str
    ) -> tuple[Histogram, Counter | None]:
        key = (definition_uri, attempt_outcome, execution_status)
        found = self._finished_cache.get(key)
        if found is None:
            name = definition_label(definition_uri)
            ended = {"SUCCEEDED": self.succeeded, "FAILED": self.failed}.get(execution_status)
            found = self._finished_cache[key] = (
                self.attempt_duration.labels(name, attempt_outcome.lower()),
                ended.labels(name) if ended is not None else None,
            )
        return found

    def reaped(self, definition_uri: str, execution_status: str) -> None:
        """An attempt recovered by the reaper: its execution retries or, out of attempts, fails."""
        self.lease_expirations.inc()
        if execution_status == "FAILED":
            self.failed.labels(definition_label(definition_uri)).inc()

    def promotions(self, by_definition: Mapping[str, int]) -> None:
        """Executions a scheduler moved to READY, counted per definition."""
        for uri, n in by_definition.items():
            self.promoted.labels(definition_label(uri)).inc(n)

    def fenced(self, shards: int, executions: int) -> None:
        """A promotion the shard-lease fence refused: how many shards, how many due there."""
        self.fenced_shards.inc(shards)
        self.fenced_executions.inc(executions)

    def cron_occurrence(self, outcome: str) -> None:
        """For the Cron Service: one recorded occurrence (``SUBMITTED``, ``SKIPPED_MISFIRE``...)."""
        self.cron_occurrences.labels(outcome.lower()).inc()

    def webhook_try(self, status: str) -> None:
        """For the webhook sender: one try recorded (``DELIVERED``, ``PENDING``, ``FAILED``)."""
        self.webhook_tries.labels(status.lower()).inc()

    def expired(self, definition_uri: str) -> None:
        self.expirations.labels(definition_label(definition_uri)).inc()

    def breaker_transition(self, definition_uri: str, to_state: str) -> None:
        self.breaker_transitions.labels(definition_label(definition_uri), to_state).inc()

    def set_counts(
        self, counts: Mapping[str, int], terminal: frozenset[str], window_seconds: float
    ) -> None:
        """Publishes a store's counts by status: non-terminal ones as queue depth, terminal ones
        as finished within the window."""
        self.finished_window.set(window_seconds)
        for status, n in counts.items():
            gauge = self.finished_recently if status in terminal else self.queue_depth
            gauge.labels(status).set(n)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def value(self, name: str, **labels: str) -> float:
        """A sample's current value (0 when absent): for tests and the dashboard."""
        got = self.registry.get_sample_value(name, labels)
        return got if got is not None else 0.0


_process = Metrics()


def process_metrics() -> Metrics:
    """This process's metrics: what ``/metrics`` serves and what services record into."""
    return _process


def serve_metrics(port: int, host: str = "127.0.0.1") -> Callable[[], None]:
    """Serves this process's metrics over HTTP on a thread of its own, for processes without the
    API (``tickwheel worker``, ``scheduler``): Prometheus scrapes each of them. Returns a stop
    function."""
    server, thread = start_http_server(port, addr=host, registry=_process.registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return stop
