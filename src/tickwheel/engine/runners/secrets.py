"""Where a worker finds the secrets that definitions reference (``${{ secrets.NAME }}``).

First its environment, ``TICKWHEEL_SECRET_<NAME>``; then its secrets file
(``--secrets-file`` / ``TICKWHEEL_SECRETS_FILE``): ``NAME=value`` lines, ``#`` comments and blank
lines ignored, readable by its owner only (mode 0600 or stricter, like an ssh key), re-read when
it changes so that a rotated secret needs no restart. Values are looked up per request and kept
nowhere else.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Final

__all__ = ["ENV_PREFIX", "Secrets", "SecretsFileError", "read_secrets_file"]

ENV_PREFIX: Final = "TICKWHEEL_SECRET_"


class SecretsFileError(OSError):
    """The secrets file cannot be used: missing, unreadable, too open, or malformed. The message
    names the file and the line, never a value."""


def read_secrets_file(path: Path) -> dict[str, str]:
    """The ``NAME=value`` pairs of ``path``, refusing a file that others may read."""
    try:
        info = path.stat()
        if info.st_mode & 0o077:
            mode = stat.S_IMODE(info.st_mode)
            raise SecretsFileError(
                f"secrets file {path} may be read by others (mode {mode:04o}): chmod 600 it"
            )
        text = path.read_text(encoding="utf-8")
    except SecretsFileError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise SecretsFileError(f"cannot read secrets file {path}: {type(exc).__name__}") from exc
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise SecretsFileError(f"secrets file {path}, line {number}: expected NAME=value")
        values[name.strip()] = value.strip()
    return values


class Secrets:
    """A worker's secrets: ``lookup(name)`` gives the value or None. ``environ`` defaults to
    this process's environment; ``file`` is the secrets file, if any."""

    def __init__(
        self, environ: Mapping[str, str] | None = None, file: str | Path | None = None
    ) -> None:
        self._environ = os.environ if environ is None else environ
        self.file = Path(file) if file else None
        self._cache: tuple[tuple[int, int, int], dict[str, str]] | None = None

    def check(self) -> None:
        """Raises SecretsFileError when the file is set but cannot be used (at start, so that
        a worker with a bad file does not fail every attempt that needs a secret)."""
        self._file_values()

    def lookup(self, name: str) -> str | None:
        """The value of secret ``name``, or None. Raises SecretsFileError for a bad file."""
        value = self._environ.get(ENV_PREFIX + name)
        if value is not None:
            return value
        return self._file_values().get(name)

    def _file_values(self) -> dict[str, str]:
        if self.file is None:
            return {}
        try:
            info = self.file.stat()
        except OSError as exc:
            raise SecretsFileError(f"cannot read secrets file {self.file}: {exc.strerror}") from exc
        stamp = (info.st_mtime_ns, info.st_size, info.st_mode)  # a chmod is seen too
        if self._cache is None or self._cache[0] != stamp:
            self._cache = (stamp, read_secrets_file(self.file))
        return self._cache[1]
