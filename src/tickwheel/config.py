"""Settings from ``TICKWHEEL_*`` environment variables; CLI flags override them.

The services' knobs take their defaults from ``services/settings.py`` and are turned into the
services' settings objects here, and only here (``scheduler_settings()``, ...)."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tickwheel.domain.addresses import parse_networks
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.domain.submission import SubmitLimits
from tickwheel.services.settings import (
    CronSettings,
    OrchestratorSettings,
    PrunerSettings,
    SchedulerSettings,
    WorkerSettings,
)

_SCHEDULER, _WORKER, _PRUNER = SchedulerSettings(), WorkerSettings(), PrunerSettings()
_CRON, _ORCHESTRATOR = CronSettings(), OrchestratorSettings()
_DAY = timedelta(days=1)


def _items(text: str) -> tuple[str, ...]:
    """A comma-separated setting as its items (blanks dropped)."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TICKWHEEL_", extra="ignore")

    database_url: str = Field(
        "sqlite:///tickwheel.db", description="sqlite:///path or postgresql://..."
    )
    read_database_url: str | None = Field(
        None,
        description="postgresql://... of a standby for the dashboard's heavy reads (they may "
        "lag the primary by the replication delay); unset: the main database",
    )
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    log_level: str = "info"
    access_log: bool = Field(
        False,
        description="a log line per HTTP request (uvicorn's access log); the request metrics "
        "count every request by route and status either way",
    )
    max_body_bytes: int = Field(1024 * 1024, gt=0, description="larger request bodies get 413")
    max_apply_body_bytes: int = Field(
        64 * 1024 * 1024, gt=0, description="POST /v1/cron-jobs/apply: larger bodies get 413"
    )
    max_past_seconds: float = Field(7 * 86400, ge=0, description="oldest executeAt accepted")
    max_future_seconds: float = Field(400 * 86400, gt=0, description="furthest executeAt accepted")
    admin_key_file: str = Field(
        "tickwheel.admin-key", description="where the first key (an operator key) goes"
    )
    insecure_no_auth: bool = False
    definitions_dir: str | None = None
    apps: str = Field("", description="module:attr of tickwheel.App objects whose jobs to register")
    tenant: str = Field("default", min_length=1, description="tenant of the first (operator) key")
    db_pool_size: int = Field(10, gt=0)
    worker_concurrency: int = Field(
        _WORKER.concurrency, gt=0, description="attempts one worker runs at once"
    )
    worker_finish_batch: int = Field(
        _WORKER.finish_batch,
        gt=0,
        description="finished attempts a worker reports in one transaction, at most",
    )
    worker_finish_interval: float = Field(
        _WORKER.finish_interval,
        ge=0,
        description="seconds a finished attempt may wait to share a transaction",
    )
    lease_seconds: float = Field(
        _WORKER.lease.total_seconds(),
        gt=0,
        description="how long a claim lasts between heartbeats",
    )
    shutdown_grace_seconds: float = Field(30.0, ge=0, description="SIGTERM: time to finish")
    cancel_grace_seconds: float = Field(
        _WORKER.cancel_grace,
        ge=0,
        description="a cancelled command or container: SIGTERM, then SIGKILL after",
    )
    max_inline_output_bytes: int = Field(
        _WORKER.max_inline_output, gt=0, description="larger outputs are stored by reference"
    )
    metrics_port: int | None = Field(
        None, ge=1, le=65535, description="worker/scheduler processes: serve /metrics here"
    )
    metrics_gauges_seconds: float = Field(
        5.0, gt=0, le=300, description="with metrics_port: queue gauges refreshed this often"
    )
    engine: bool = Field(True, description="run scheduler, reaper and workers inside the server")
    cron_lead_seconds: float = Field(
        _CRON.lead.total_seconds(),
        ge=0,
        description="cron occurrences are materialised this far ahead (more than a minute: the "
        "next herd of every-minute jobs is materialised before the current one starts)",
    )
    cron_misfire_grace_seconds: float = Field(
        _CRON.grace.total_seconds(),
        ge=0,
        description="a cron occurrence later than this is missed (misfire policy)",
    )
    cron_claim_seconds: float = Field(
        _CRON.lease.total_seconds(),
        gt=0,
        description="a cron instance's claim on a job; then another may take it",
    )
    orchestrator_claim_seconds: float = Field(
        _ORCHESTRATOR.lease.total_seconds(),
        gt=0,
        description="an orchestrator's claim on outbox rows; then another takes them",
    )
    workflow_stall_seconds: float = Field(
        _ORCHESTRATOR.stall_grace.total_seconds(),
        gt=0,
        description="a workflow run with no progress this long is advanced by a sweep",
    )
    shard_lease_seconds: float = Field(
        _SCHEDULER.shard_lease.total_seconds(),
        gt=0,
        description="a scheduler's lease on its shards (renewed every third of it)",
    )
    wheel_window_seconds: float = Field(
        _SCHEDULER.window.total_seconds(),
        gt=0,
        le=600,
        description="a scheduler keeps the executions due this far ahead in its timing wheel",
    )
    retention_days: float = Field(
        _PRUNER.retention / _DAY,
        ge=0,
        description="terminal executions finished longer ago are pruned (0: never)",
    )
    dashboard_secret: str | None = Field(
        None, description="signs dashboard session cookies (default: random per process)"
    )

    # What a worker runs (docs/worker_policy.md): comma-separated lists; empty means the default.
    python_modules: str = Field(
        "", description="module prefixes python entrypoints may come from (default: code paths)"
    )
    python_paths: str = Field(
        "", description="a worker's code paths (--path), comma-separated; default: working dir"
    )
    commands: str = Field("", description="executables command executions may run; '*': any")
    container_images: str = Field("", description="image patterns containers may use; '*': any")
    http_allow_networks: str = Field(
        "", description="networks http executions may reach inside the denied ranges"
    )
    http_allow_hosts: str = Field(
        "", description="host names http executions may reach whatever they resolve to"
    )
    secrets_file: str | None = Field(None, description="NAME=value lines, mode 0600")

    @field_validator("read_database_url")
    @classmethod
    def _read_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("the read database must be PostgreSQL: postgresql://...")
        return value

    @field_validator("http_allow_networks")
    @classmethod
    def _networks(cls, value: str) -> str:
        parse_networks(_items(value))  # raises ValueError naming the bad one
        return value

    def run_policy(self) -> RunPolicy:
        """The worker's run policy (and registration's, for what it can judge)."""
        return RunPolicy(
            python_modules=_items(self.python_modules),
            python_paths=_items(self.python_paths),
            commands=_items(self.commands),
            container_images=_items(self.container_images),
            http_allow_networks=parse_networks(_items(self.http_allow_networks)),
            http_allow_hosts=_items(self.http_allow_hosts),
        )

    def scheduler_settings(self) -> SchedulerSettings:
        return SchedulerSettings(
            shard_lease=timedelta(seconds=self.shard_lease_seconds),
            window=timedelta(seconds=self.wheel_window_seconds),
        )

    def worker_settings(self) -> WorkerSettings:
        return WorkerSettings(
            concurrency=self.worker_concurrency,
            lease=timedelta(seconds=self.lease_seconds),
            max_inline_output=self.max_inline_output_bytes,
            finish_batch=self.worker_finish_batch,
            finish_interval=self.worker_finish_interval,
            cancel_grace=self.cancel_grace_seconds,
        )

    def pruner_settings(self) -> PrunerSettings | None:
        """None: a retention of 0 keeps everything, so no pruner runs."""
        if self.retention_days <= 0:
            return None
        return PrunerSettings(retention=timedelta(days=self.retention_days))

    def cron_settings(self) -> CronSettings:
        return CronSettings(
            lead=timedelta(seconds=self.cron_lead_seconds),
            grace=timedelta(seconds=self.cron_misfire_grace_seconds),
            lease=timedelta(seconds=self.cron_claim_seconds),
        )

    def orchestrator_settings(self) -> OrchestratorSettings:
        # One knob for both: a stalled run waits at most about twice it to be advanced.
        stall = timedelta(seconds=self.workflow_stall_seconds)
        return OrchestratorSettings(
            lease=timedelta(seconds=self.orchestrator_claim_seconds),
            stall_grace=stall,
            sweep_every=stall,
        )

    def submit_limits(self) -> SubmitLimits:
        return SubmitLimits(
            max_past=timedelta(seconds=self.max_past_seconds),
            max_future=timedelta(seconds=self.max_future_seconds),
        )
