"""The one local lease store: which goal is current and the lease held for
each goal, in private files so that consecutive calls (the CLI's, the hooks',
and an MCP server started with ``--share-leases``) need no copy-paste of a
secret.

A lease file is created 0600 in a 0700 directory; its token never reaches
stdout. ``MemoryLeases`` is the same store kept in one process only, the MCP
server's default: the token then never touches the disk at all.
"""

import contextlib
import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no flock; the hooks' turn-end race stays open there
    fcntl = None  # type: ignore[assignment]

Lease = dict[str, Any]  # {"token": ..., "generation": ...}


def state_dir() -> Path:
    return Path(os.environ.get("WAKELEDGER_STATE_DIR") or Path.home() / ".wakeledger")


def write_private(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Created 0600 from the start: never a moment where another user can read it.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w") as handle:
        handle.write(content)
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)


class MemoryLeases:
    """Leases held by this process alone."""

    def __init__(self) -> None:
        self._leases: dict[str, Lease] = {}
        self._current: str | None = None

    def save(self, goal_id: str, lease: Lease) -> None:
        self._leases[goal_id] = {"token": lease["token"], "generation": lease["generation"]}
        self._current = goal_id

    def get(self, goal_id: str) -> Lease | None:
        return self._leases.get(goal_id)

    def forget(self, goal_id: str) -> None:
        self._leases.pop(goal_id, None)

    def set_current(self, goal_id: str) -> None:
        self._current = goal_id

    def current(self) -> str | None:
        return self._current


class FileLeases:
    """Leases in ``<state dir>/leases/<goal>.json``; the current goal in
    ``<state dir>/current``. Read from disk on every call: another process
    (a hook, the CLI) may have changed them."""

    def __init__(self, root: Path | None = None):
        self.root = root if root is not None else state_dir()

    def _path(self, goal_id: str) -> Path:
        # A goal id names a file here: never one outside the leases directory.
        if not goal_id or Path(goal_id).name != goal_id or goal_id.startswith("."):
            raise ValueError(f"not a goal id: {goal_id!r}")
        return self.root / "leases" / f"{goal_id}.json"

    def save(self, goal_id: str, lease: Lease) -> None:
        record = {"goal_id": goal_id, "token": lease["token"],
                  "generation": lease["generation"]}
        write_private(self._path(goal_id), json.dumps(record))
        self.set_current(goal_id)

    @contextlib.contextmanager
    def locked(self, goal_id: str, wait: float = 8.0) -> Iterator[None]:
        """One process at a time on the goal's lease: read it, call the server,
        save or forget it. Claude Code fires StopFailure without waiting for it
        and runs SessionEnd right after, so the two hooks race for the same
        lease; unserialized, the release can land between the report's read
        and its call (409, the limit never recorded). Past ``wait`` seconds we
        go on unlocked: a hook never stalls the session for long."""
        path = self._path(goal_id).with_suffix(".lock")
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, stat.S_IRUSR | stat.S_IWUSR)
        try:
            deadline = time.monotonic() + wait
            while fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(0.05)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def get(self, goal_id: str) -> Lease | None:
        try:
            record = json.loads(self._path(goal_id).read_text())
            return {"token": record["token"], "generation": record["generation"]}
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def forget(self, goal_id: str) -> None:
        # A name that is no goal id: nothing was ever saved under it.
        with contextlib.suppress(ValueError):
            self._path(goal_id).unlink(missing_ok=True)

    def set_current(self, goal_id: str) -> None:
        write_private(self.root / "current", goal_id)

    def current(self) -> str | None:
        try:
            return (self.root / "current").read_text().strip() or None
        except OSError:
            return None

    def bind_session(self, session_id: str, goal_id: str) -> None:
        """Which goal an agent's session (a Claude Code session id) works on:
        the hooks of its later events find the goal, and its lease, here."""
        write_private(self._session_path(session_id), goal_id)

    def session_goal(self, session_id: str) -> str | None:
        try:
            return self._session_path(session_id).read_text().strip() or None
        except (OSError, ValueError):
            return None

    def _session_path(self, session_id: str) -> Path:
        if not session_id or Path(session_id).name != session_id or session_id.startswith("."):
            raise ValueError(f"not a session id: {session_id!r}")
        return self.root / "sessions" / session_id
