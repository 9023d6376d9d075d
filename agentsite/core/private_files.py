"""Files only the user running agentsite may read: its data directory, secrets, SQLite database.

Each is created with its final mode (``os.open`` with 0600, ``mkdir`` with
0700), never created with the umask's mode and restricted afterwards: in
between, another user could open it, and an open file stays readable.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """Make ``path`` (and missing parents) a directory only its owner can enter."""
    path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:  # made before this rule, or by hand
        path.chmod(PRIVATE_DIR_MODE)
    return path


def private_file_create(path: Path, text: str) -> bool:
    """Create ``path`` holding ``text``, 0600 from its first byte; False if it exists.

    The text is written to a private temporary file that is then linked into
    place, so a process reading ``path`` at the same moment never sees it empty.
    """
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    try:
        with os.fdopen(fd, "w") as file:
            file.write(text)
        os.link(temporary, path)
        return True
    except FileExistsError:
        return False
    finally:
        temporary.unlink(missing_ok=True)


def private_file_read(path: Path) -> str:
    """The text of a private file, restricted first if an older version left it readable."""
    if path.stat().st_mode & 0o077:
        path.chmod(PRIVATE_FILE_MODE)
    return path.read_text()


def sqlite_file_private(path: Path) -> None:
    """Create an SQLite database file 0600 before SQLite would create it with the umask's mode.

    SQLite gives its -wal and -shm files the database file's mode, so they follow.
    An existing database readable by others is restricted.
    """
    if not path.exists():
        private_file_create(path, "")  # an empty file is an empty SQLite database
        return
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if file.exists() and file.stat().st_mode & 0o077:
            file.chmod(PRIVATE_FILE_MODE)
