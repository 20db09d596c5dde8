"""The events a webhook may subscribe to: a leaf of its own, so that ``tickwheel webhooks add
--help`` can name them without the webhook domain's URL rules and signing
(``domain/webhooks.py`` re-exports it)."""

from __future__ import annotations

from enum import StrEnum


class WebhookEvent(StrEnum):
    EXECUTION_FAILED = "execution.failed"
    """An execution dead-lettered: FAILED after its last attempt (or a permanent error)."""
    CRON_MISSED = "cron.missed"
    """A cron occurrence skipped because it was found past its misfire grace."""
    CRON_FAILED = "cron.failed"
    """A cron occurrence whose submission was refused."""
    WORKFLOW_RUN_FAILED = "workflow_run.failed"
