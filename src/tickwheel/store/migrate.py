"""Versioned migrations: ``NNNN_<what>.sql`` files per dialect, applied in order, each once.

The runner is dialect-free; each store applies a migration inside its own transaction and
records it in ``tickwheel_migrations`` with a checksum, so an edited, already-applied migration
is detected instead of silently diverging."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()

    @property
    def label(self) -> str:
        return f"{self.version:04d}_{self.name}"


class MigrationError(RuntimeError):
    pass


def load_migrations(package: str) -> list[Migration]:
    found: list[Migration] = []
    for entry in resources.files(package).iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise MigrationError(
            f"migrations of {package} must be numbered 1..n without gaps: {versions}"
        )
    return found


def pending(all_migrations: list[Migration], applied: dict[int, str]) -> list[Migration]:
    """Migrations not applied yet; raises if an applied one was edited afterwards."""
    for m in all_migrations:
        if m.version in applied and applied[m.version] != m.checksum:
            raise MigrationError(f"migration {m.label} changed after it was applied")
    return [m for m in all_migrations if m.version not in applied]
