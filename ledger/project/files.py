"""Files under var/ are the service user's alone.

The SQLite ledger holds admin session keys and every goal's notes, var/runs/
holds the output of dispatched commands, var/secret_key keys every API token.
The settings (loaded first by every process of ours: manage.py, gunicorn,
qcluster) call ``private_var`` before anything is created there:

- var/ is created 0700, so nothing under it is reachable by other users
  whatever its own mode;
- the SQLite file is created 0600 before SQLite opens it (SQLite creates its
  -wal and -shm files with the database file's mode, so they follow);
- what an older version left world-readable is narrowed once at start-up.

No process-wide umask: commands the dispatcher starts inherit ours, and the
files they write in an agent's workspace are not ours to restrict.
"""

import contextlib
import os
import stat
from pathlib import Path
from typing import BinaryIO


def private_var(var_dir: Path, database: Path | None) -> None:
    var_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    tighten(var_dir)
    if database is not None:
        # O_EXCL: never truncate; an existing database keeps its contents.
        with contextlib.suppress(FileExistsError):
            os.close(os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def private_dir(path: Path) -> Path:
    """``path`` as a directory, created 0700 when it is new (not narrowed
    only at the next start: its first files are written right away)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def open_private(path: Path, mode: str = "ab") -> BinaryIO:
    """``path`` opened for appending, created 0600 when it is new (``open``
    would create it 0666 less the umask: 0644, readable by every user)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    return os.fdopen(fd, mode)


def tighten(var_dir: Path) -> None:
    """Narrow var/ and what is already in it to the owner (0700 / 0600)."""
    for path in (var_dir, *var_dir.glob("*.sqlite3*"), var_dir / "secret_key",
                 var_dir / "runs", *var_dir.glob("runs/*")):
        try:
            mode = path.lstat()
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(mode.st_mode) or mode.st_mode & stat.S_ISVTX:
            continue  # a link, or a shared sticky directory such as /tmp
        wanted = 0o700 if stat.S_ISDIR(mode.st_mode) else 0o600
        if stat.S_IMODE(mode.st_mode) & 0o077:
            # Not ours (a shared directory): left to the operator.
            with contextlib.suppress(PermissionError):
                path.chmod(stat.S_IMODE(mode.st_mode) & wanted)
