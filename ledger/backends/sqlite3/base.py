"""Django's SQLite backend, with writers queued on a file lock.

Every write transaction here is ``BEGIN IMMEDIATE`` (ledger/project/settings.py): it
takes SQLite's one write lock at its start. A second writer that finds it
taken is put to sleep by SQLite's busy handler for 1, 2, 5, 10, 15, 20, 25 …
ms at a time and only then looks again, however soon the lock was freed: with
two web workers each holding the lock for a millisecond or two per command,
half the machine sat idle in those sleeps and the slowest requests took
several times the median. So a writer first takes an exclusive ``flock`` on
a file beside the database (``<database>-writers.lock``), looking again
within a millisecond while it is taken; once it has it, BEGIN IMMEDIATE finds
SQLite's lock free, and it lets go when it commits or rolls back.

The flock is only a queue in front of SQLite's lock, never a replacement: a
writer that waits longer than the busy timeout goes on to BEGIN IMMEDIATE
without it, looks at SQLite's lock once (no second wait: the two waits share
the one bound) and gets SQLite's own "database is locked" if it is taken
(answered 503 database_busy by the API: ledger/eventstore/busy.py), and a
process that dies holding it loses it with its file descriptor. Readers
(autocommit SELECTs, WAL snapshots) never take it.
"""

import fcntl
import os
import time
from typing import Any

from django.db.backends.sqlite3 import base


class DatabaseWrapper(base.DatabaseWrapper):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._queue_fd: int | None = None
        self._queue_pid = 0
        self._queued = False

    # Django starts every atomic block here on SQLite (autocommit stays on in
    # the driver; BEGIN takes the settings' transaction_mode, IMMEDIATE) and
    # ends it with _commit or _rollback: the backend's own hooks, with the
    # writers' queue around them.
    def _start_transaction_under_autocommit(self) -> None:
        self._enter_queue()
        # The queue and SQLite's lock share one bound (the busy timeout,
        # WAKELEDGER_DB_WAIT_SECONDS): a writer that waited it out in the
        # queue looks at SQLite's lock once and does not wait the bound a
        # second time. Waiting twice made a locked database answer after 20
        # to 40 s instead of the bound.
        waited_out = not self._queued and self._queue_file() is not None
        try:
            # Straight to the driver, as Django's own _commit does: its cursor
            # wrapper (a new cursor, the debug and error layers, the
            # placeholder rewrite) cost three times SQLite's BEGIN, on every
            # write transaction (docs/performance.md, "The house redesign's
            # cost"). The price: BEGIN is not in connection.queries.
            mode = self.transaction_mode
            with self.wrap_database_errors:
                if waited_out:
                    self.connection.execute("PRAGMA busy_timeout = 0")
                try:
                    self.connection.execute(f"BEGIN {mode}" if mode else "BEGIN")
                finally:
                    if waited_out:
                        self.connection.execute(f"PRAGMA busy_timeout = {self._timeout_ms()}")
        except BaseException:
            self._leave_queue()
            raise

    def _timeout_ms(self) -> int:
        return int(float(self.settings_dict["OPTIONS"].get("timeout", 5)) * 1000)

    def _commit(self) -> None:
        try:
            if self.queries_logged or self.connection is None:
                super()._commit()  # COMMIT in connection.queries, as Django logs it
            else:
                # Django's _commit without debug_transaction: a generator-based
                # context manager that only logs, when queries are logged.
                with self.wrap_database_errors:
                    self.connection.commit()
        finally:
            self._leave_queue()

    def _rollback(self) -> None:
        try:
            super()._rollback()
        finally:
            self._leave_queue()

    def _close(self) -> None:
        try:
            super()._close()
        finally:
            self._leave_queue()

    def _queue_file(self) -> int | None:
        if self.is_in_memory_db():
            return None  # one process, one connection: nothing to queue for
        if self._queue_fd is None or self._queue_pid != os.getpid():
            # Opened per process: a descriptor inherited over fork would share
            # its lock with the parent.
            self._queue_fd = os.open(f"{self.settings_dict['NAME']}-writers.lock",
                                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._queue_pid = os.getpid()
        return self._queue_fd

    def _enter_queue(self) -> None:
        fd = self._queue_file()
        if fd is None or self._queued:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._queued = _wait(fd, float(self.settings_dict["OPTIONS"].get("timeout", 5)))
        else:
            self._queued = True

    def _leave_queue(self) -> None:
        if self._queued:
            self._queued = False
            fcntl.flock(self._queue_fd, fcntl.LOCK_UN)


def _wait(fd: int, timeout: float) -> bool:
    """Wait for the flock up to ``timeout`` seconds: True once held.

    flock has no timed wait, so it is polled, from 50 us up to 1 ms between
    looks (SQLite's own handler starts at 1 ms and grows to 100 ms)."""
    deadline = time.monotonic() + timeout
    pause = 0.00005
    while time.monotonic() < deadline:
        time.sleep(pause)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pause = min(pause * 2, 0.001)
            continue
        return True
    return False
