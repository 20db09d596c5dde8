"""The database file's permissions. It holds every tenant's inputs, outputs and API key hashes,
so only its owner may read it, whatever the process's umask says."""

from __future__ import annotations

import os
from pathlib import Path


def create_private(path: Path) -> None:
    """Creates ``path`` empty with mode 0600 if it does not exist yet (an existing file keeps the
    mode its operator gave it). SQLite then creates the ``-wal``, ``-shm`` and ``-journal`` files
    with the database file's mode, so they are private too."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, 0o600)  # os.open's mode is filtered by the umask; this is not
    finally:
        os.close(fd)
