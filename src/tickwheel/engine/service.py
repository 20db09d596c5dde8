"""The engine's services (scheduler, worker, reaper, pruner) build on the one service base,
``tickwheel.services.base``, which the Cron Service and the orchestrator share; this name stays
so that the engine's imports read as before."""

from tickwheel.services.base import Service, is_database_error, new_owner

__all__ = ["Service", "is_database_error", "new_owner"]
