"""A cron job's schedule lives in the domain (``domain/cron_schedule.py``), where the
application layer's cron rules reach it; the Cron Service's modules import it from here."""

from tickwheel.domain.cron_schedule import CHUNK, TINY, Schedule, Window

__all__ = ["CHUNK", "TINY", "Schedule", "Window"]
