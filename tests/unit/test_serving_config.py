"""What ``tickwheel server`` hands uvicorn (``server/serving.py: uvicorn_config``): no access log
line per request unless asked for (``TICKWHEEL_ACCESS_LOG``), the rest as before."""

from __future__ import annotations

import logging

import pytest
from fastapi import FastAPI

from tickwheel.config import Settings
from tickwheel.server.serving import uvicorn_config


@pytest.fixture(autouse=True)
def _uvicorn_loggers(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn's Config sets its access logger up process-wide: put it back afterwards."""
    access = logging.getLogger("uvicorn.access")
    monkeypatch.setattr(access, "handlers", list(access.handlers))
    monkeypatch.setattr(access, "propagate", access.propagate)
    monkeypatch.setattr(access, "level", access.level)


def test_no_access_log_unless_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TICKWHEEL_ACCESS_LOG", raising=False)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    config = uvicorn_config(FastAPI(), settings)
    assert config.access_log is False
    # What uvicorn's protocol asks before writing a line: nothing would take it.
    assert not logging.getLogger("uvicorn.access").hasHandlers()
    assert (config.host, config.port, config.log_config) == ("127.0.0.1", 8000, None)


def test_the_access_log_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKWHEEL_ACCESS_LOG", "true")
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.access_log is True
    assert uvicorn_config(FastAPI(), settings).access_log is True
