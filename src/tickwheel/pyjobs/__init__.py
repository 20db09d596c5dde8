"""Jobs defined in Python (``tickwheel.App``): see ``jobs.py``."""

from tickwheel.pyjobs.jobs import App, Job

__all__ = ["App", "Job"]
