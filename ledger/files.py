"""Files under var/ are the service user's alone.

The SQLite ledger holds admin session keys and every goal's notes, var/runs/
holds the output of dispatched commands, var/secret_key keys every API token.
Every process of ours (manage.py, gunicorn, qcluster) loads the settings
first, and the settings call ``private_files`` before creating anything, so:

- the umask is 077: whatever the process creates later is 0600 (files) or
  0700 (directories), including the files SQLite creates on its own (the
  database, its -wal and -shm, which copy the database file's mode) and those
  of libraries that never pass a mode;
- what an older version left world-readable is narrowed once at start-up.
"""

import contextlib
import os
import stat
from pathlib import Path

PRIVATE_UMASK = 0o077


def private_files() -> None:
    os.umask(PRIVATE_UMASK)


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
