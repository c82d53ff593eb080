"""SQLite writers queue on a file lock beside the database before BEGIN
IMMEDIATE (ledger/backends/sqlite3), instead of sleeping in SQLite's busy
handler."""

import fcntl
import os
import stat
import threading

import pytest
from django.db import connection, connections, transaction

from ledger.models import Goal

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif("connection.vendor != 'sqlite'")]
WAIT = 30


def queue_path() -> str:
    return f"{connection.settings_dict['NAME']}-writers.lock"


def held_by_someone() -> bool:
    fd = os.open(queue_path(), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock this probe took
    return False


def test_a_write_transaction_holds_the_queue_until_it_ends():
    Goal.objects.count()  # a read in autocommit takes nothing
    assert not held_by_someone()
    with transaction.atomic():
        Goal.objects.count()
        assert held_by_someone()
    assert not held_by_someone()
    with pytest.raises(RuntimeError), transaction.atomic():
        assert held_by_someone()
        raise RuntimeError("rolled back")
    assert not held_by_someone()
    assert stat.S_IMODE(os.stat(queue_path()).st_mode) == 0o600


def test_a_second_writer_waits_in_the_queue_and_goes_on_when_the_first_commits(lock_waits):
    inside, release, order = threading.Event(), threading.Event(), []

    def first() -> None:
        try:
            with transaction.atomic():
                order.append("first in")
                inside.set()
                assert release.wait(WAIT)
                order.append("first out")
        finally:
            connections.close_all()

    def second() -> None:
        try:
            with transaction.atomic():
                order.append("second in")
        finally:
            connections.close_all()

    a = threading.Thread(target=first)
    a.start()
    assert inside.wait(WAIT)
    b = threading.Thread(target=second)
    b.start()
    lock_waits.wait()  # the second writer found the queue taken and waits in it
    assert b.is_alive() and order == ["first in"], "the second writer did not wait"
    release.set()
    a.join(WAIT)
    b.join(WAIT)
    assert order == ["first in", "first out", "second in"]


def test_a_queue_held_past_the_busy_timeout_falls_back_to_sqlites_own_lock(settings):
    """The file lock is only a queue: held by something that is not a write
    transaction (here: a bare descriptor), a writer waits the busy timeout
    and then goes on to BEGIN IMMEDIATE, which finds SQLite's lock free."""
    connection.close()
    options = connection.settings_dict["OPTIONS"]
    saved = options.get("timeout")
    options["timeout"] = 0.2
    fd = os.open(queue_path(), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with transaction.atomic():
            assert Goal.objects.count() == 0
    finally:
        os.close(fd)
        options["timeout"] = saved
        connection.close()
