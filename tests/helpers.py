"""Helpers more than one test module needs, defined once.

- ``ledger`` / ``ledger_text``: the ``ledger`` management command, called in
  process, with its output captured;
- ``wait_for``: poll a condition up to a generous deadline (live servers,
  child processes, clusters) instead of sleeping a guessed time;
- ``Worker``, ``transaction_held_open`` and ``LockWaits``: a second database
  connection on a thread, a write transaction kept open on one, and the proof
  that another connection is waiting for its lock, without a timed join;
- ``staff`` (an admin client) and ``issue_agent_token`` (an agent's bearer token);
- ``manage_env`` and ``manage_processes``: real ``manage.py`` processes (a
  qcluster, the notification watch) on the test's PostgreSQL database, each
  logging to a file, all stopped when the block ends.

Fixtures stay in tests/conftest.py; builders of goals in tests/factories.py.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections, transaction

# Seconds a test waits for a thread, a process or a server before it fails. A
# deadline, never a duration: a passing test waits only as long as it must.
WAIT = 30


# ------------------------------------------------------------------ ledger


def ledger(*args: str, **options: Any) -> tuple[int, str, str]:
    """`manage.py ledger ARGS`: its exit code, stdout and stderr (a refusal's
    CommandError is its code and message, as the shell would show them)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("ledger", *args, stdout=out, stderr=err, **options)
        code = 0
    except CommandError as exc:
        code = exc.returncode
        err.write(str(exc))
    return code, out.getvalue(), err.getvalue()


def ledger_text(*args: str, stdout: io.StringIO | None = None,
                stderr: io.StringIO | None = None, **options: Any) -> str:
    """`manage.py ledger ARGS` that must succeed: what it printed (a refusal raises)."""
    out = stdout if stdout is not None else io.StringIO()
    call_command("ledger", *args, stdout=out, stderr=stderr or io.StringIO(), **options)
    return out.getvalue()


# ------------------------------------------------------------------ waiting


def wait_for(condition: Callable[[], Any], timeout: float = WAIT, what: str = "the condition",
             interval: float = 0.05) -> Any:
    """Poll ``condition`` until it returns something truthy, and return that;
    fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def written_json(path: Path, timeout: float = WAIT) -> str:
    """The text a child process writes to ``path``, once it is whole JSON: a
    file that exists may still be mid-write, so its text must parse."""

    def whole() -> str | None:
        try:
            text = path.read_text()
            json.loads(text)
        except (FileNotFoundError, ValueError):
            return None
        return text

    return wait_for(whole, timeout, f"{path} to be written")


# ------------------------------------------------------------------ threads and locks


class Worker(threading.Thread):
    """Call ``target`` on a thread of its own (so: a database connection of its
    own, closed at the end); ``result()`` joins it and returns or re-raises."""

    def __init__(self, target: Callable[[], Any]):
        super().__init__(daemon=True)
        self.target = target
        self.value: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.value = self.target()
        except BaseException as error:
            self.error = error
        finally:
            connections.close_all()  # this thread's own connection
            self.done.set()

    def result(self, timeout: float = WAIT) -> Any:
        self.join(timeout)
        assert not self.is_alive(), f"the thread did not finish within {timeout} s"
        if self.error is not None:
            raise self.error
        return self.value


def started(target: Callable[[], Any]) -> Worker:
    worker = Worker(target)
    worker.start()
    return worker


@contextmanager
def transaction_held_open(write: Callable[[], Any]) -> Iterator[None]:
    """Run ``write`` inside a transaction on another connection and keep that
    transaction open (uncommitted, its locks held) until the block ends; then
    let it commit and wait for it. A slow append, a stalled writer."""
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with transaction.atomic():
            write()
            inside.set()
            release.wait(WAIT)

    writer = started(hold)
    try:
        wait_for(lambda: inside.is_set() or writer.done.is_set(), what="the write")
        if not inside.is_set():
            writer.result()  # it failed before holding anything: raise its error
        yield
    finally:
        release.set()
        writer.result()


class LockWaits:
    """Proof that some connection is waiting for a database lock, with no
    sleep: on SQLite the writers' queue (ledger/backends/sqlite3) only calls
    its ``_wait`` when the queue is taken, and this wraps it to signal; on
    PostgreSQL pg_locks lists the request not yet granted. Build it before the
    waiter starts (tests/conftest.py's ``lock_waits`` fixture does)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.queued = threading.Event()
        if connection.vendor == "sqlite":
            from ledger.backends.sqlite3 import base

            real = base._wait

            def waiting(fd: int, timeout: float) -> bool:
                self.queued.set()
                return real(fd, timeout)

            monkeypatch.setattr(base, "_wait", waiting)

    def wait(self, timeout: float = WAIT) -> None:
        """Return once another connection waits for a lock; fail after ``timeout``."""
        if connection.vendor == "postgresql":
            def ungranted() -> int:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                    return cursor.fetchone()[0]

            wait_for(ungranted, timeout, "a connection waiting for a lock", interval=0.01)
        else:
            assert self.queued.wait(timeout), "no writer waited in the SQLite writers' queue"


# ------------------------------------------------------------------ users


def staff(username: str, role: str | None = None, superuser: bool = False):
    """A logged-in admin client: a staff user of ``role``, or a superuser."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.test import Client

    users = get_user_model()
    if superuser:
        user = users.objects.create_superuser(username, password="pw-for-tests")
    else:
        user = users.objects.create_user(username, password="pw-for-tests", is_staff=True)
        user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


def issue_agent_token(username: str) -> str:
    """A bearer token of a new user in the agent group, as `ledger agent create` issues."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from ledger.access import accounts

    user = get_user_model().objects.create(username=username)
    user.groups.add(Group.objects.get_or_create(name="agent")[0])
    return accounts.issue_token(user)


# ------------------------------------------------------------------ real manage.py processes

ROOT = Path(__file__).resolve().parents[1]


def manage_env(settings: Any, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a real ``manage.py`` process that shares the test's
    PostgreSQL database (the test's own transactions must commit: a
    ``transaction=True`` test), with its own var/ and one worker."""
    db = connection.settings_dict
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            "SECRET_KEY": settings.SECRET_KEY, "WAKELEDGER_VAR_DIR": str(tmp_path / "var"),
            "WAKELEDGER_Q_WORKERS": "1", **extra}


class ManageProcesses:
    """``manage.py`` processes started by one test, each in its own session
    (``os.killpg`` kills a whole qcluster) and logging to ``NAME-N.log``."""

    def __init__(self, env: dict[str, str], logs: Path):
        self.env, self.logs = env, logs
        self.started: list[tuple[subprocess.Popen[bytes], Any]] = []

    def spawn(self, name: str, *args: str, **extra: str) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{name}-{len(self.started)}.log", "wb")  # noqa: SIM115
        process = subprocess.Popen([sys.executable, "manage.py", *args], cwd=ROOT,
                                   env={**self.env, **extra}, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        self.started.append((process, log))
        return process

    def stop(self) -> None:
        """SIGTERM to each one still running (a clean stop), SIGKILL to its
        whole group if it has not stopped within WAIT."""
        for process, log in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=WAIT)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=WAIT)
            log.close()
        self.started.clear()


@contextmanager
def manage_processes(env: dict[str, str], logs: Path) -> Iterator[ManageProcesses]:
    """Start ``manage.py`` processes with ``spawn``; every one is stopped when
    the block ends, passed or failed."""
    processes = ManageProcesses(env, logs)
    try:
        yield processes
    finally:
        processes.stop()
