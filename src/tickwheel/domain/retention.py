"""The batch sizes of run-history retention, a leaf of their own: ``tickwheel prune --help``
and ``tickwheel db partitions drop --help`` show them as defaults without importing the pruner
(the engine) or the partition manager (the PostgreSQL store) that use them."""

from __future__ import annotations

from typing import Final

PRUNE_BATCH: Final = 1000
"""Executions (or cron history rows) the pruner deletes per transaction, at most: the default of
``PrunerSettings.batch`` and of ``tickwheel prune --batch``."""

DROP_BATCH: Final = 5000
"""Child rows (attempts, events, outputs) deleted per statement before a monthly partition of
the executions is dropped: the default of ``tickwheel db partitions drop --batch``."""
