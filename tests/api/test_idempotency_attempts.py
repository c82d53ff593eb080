"""An Idempotency-Key's record is written in the command's own transaction or
not at all, so two attempts with one key are serialized by the database and
only one command ever runs (docs/integrity.md, "Idempotency: one
transaction, the database decides").

Two real requests on two threads (two database connections); the first is
paused with a threading.Event at a chosen point."""

import threading
from collections.abc import Callable

import pytest
from django.db import connection
from rest_framework.test import APIClient

from api import idempotency
from ledger.access import accounts
from ledger.access.models import IdempotencyRecord
from ledger.models import Event
from tests.factories import errors_since, server_log

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "cp-stall"
STORED = idempotency.key_digest(KEY)  # what the ledger keeps of it
WAIT = 30  # seconds a test waits for a thread before failing


class Paused:
    """Wraps a function of api.idempotency so that its first call pauses
    (after or before running, as ``when`` says) until released."""

    def __init__(self, real: Callable, when: str):
        self.real, self.when = real, when
        self.reached, self.release = threading.Event(), threading.Event()
        self.calls = 0

    def __call__(self, *args):
        self.calls += 1
        first = self.calls == 1
        if first and self.when == "before":
            self._pause()
        result = self.real(*args)
        if first and self.when == "after":
            self._pause()
        return result

    def _pause(self) -> None:
        self.reached.set()
        assert self.release.wait(WAIT), "the test never released the paused attempt"


class Request(threading.Thread):
    """One POST on its own thread (and so its own database connection)."""

    def __init__(self, token: str, path: str, body: dict):
        super().__init__(daemon=True)
        self.token, self.path, self.body = token, path, body
        self.response = None

    def run(self) -> None:
        try:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {self.token}")
            self.response = client.post(f"/api/v1/{self.path}", self.body, format="json",
                                        HTTP_IDEMPOTENCY_KEY=KEY)
        finally:
            connection.close()

    def result(self):
        self.join(WAIT)
        assert not self.is_alive(), "the request never finished"
        return self.response


@pytest.fixture
def checkpoint(agent, clock):
    """A running goal of agent-1's, and the path and body of a checkpoint on it."""
    body = agent.start().json()
    gid = body["goal"]["id"]
    lease = {"token": body["lease"]["token"], "generation": body["lease"]["generation"]}
    return gid, f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "tests written",
                                             "progress_pct": 40}


def keyed_events(gid: str) -> list[tuple[int, str]]:
    return list(Event.objects.filter(goal_id=gid, idempotency_key=STORED).order_by("seq")
                .values_list("seq", "kind"))



def six_at_once(token: str, path: str, body: dict) -> list:
    """The same keyed request sent by six threads released together."""
    barrier = threading.Barrier(6)

    class AtOnce(Request):
        def run(self) -> None:
            barrier.wait(WAIT)
            super().run()

    requests = [AtOnce(token, path, body) for _ in range(6)]
    for request in requests:
        request.start()
    return [request.result() for request in requests]

def test_an_attempt_that_stalled_before_its_transaction_replays_the_retrys_answer(
        agent, clock, checkpoint, monkeypatch):
    """The first attempt stalls before it claims the key (a paused process);
    its retry records the checkpoint. The first attempt then wakes, finds the
    key answered and replays that answer: its own command never runs."""
    gid, path, body = checkpoint
    paused = Paused(idempotency._keyed, when="before")
    monkeypatch.setattr(idempotency, "_keyed", paused)
    first = Request(agent.token, path, body)
    first.start()
    assert paused.reached.wait(WAIT)

    retry = agent.post(path, body, key=KEY)
    assert retry.status_code == 201 and "Idempotent-Replayed" not in retry
    paused.release.set()
    stalled = first.result()

    assert stalled.status_code == 201 and stalled["Idempotent-Replayed"] == "true"
    assert stalled.json() == retry.json()
    assert keyed_events(gid) == [(4, "checkpoint.recorded")]
    assert IdempotencyRecord.objects.get(owner="agent-1", key=STORED).status_code == 201


def test_a_retry_waits_for_an_attempt_inside_its_transaction_and_replays_it(
        agent, clock, checkpoint, monkeypatch, vendor, lock_waits):
    """The first attempt has claimed the key and appended its events and stalls
    before storing its answer (a slow database). Its retry waits for it —
    SQLite: for the write lock; PostgreSQL: on the first attempt's
    uncommitted row of the key's unique index — and then replays its answer.
    No time decides it, and the checkpoint is recorded once."""
    gid, path, body = checkpoint
    paused = Paused(idempotency._complete, when="before")
    monkeypatch.setattr(idempotency, "_complete", paused)
    first = Request(agent.token, path, body)
    first.start()
    assert paused.reached.wait(WAIT)
    clock.advance(seconds=3600)  # however long it takes

    retry = Request(agent.token, path, body)
    retry.start()
    lock_waits.wait()  # the retry is queued behind the first attempt's transaction
    assert retry.is_alive() and retry.response is None, \
        "the retry did not wait for the attempt in flight"
    paused.release.set()
    stalled, retried = first.result(), retry.result()

    assert stalled.status_code == 201 and "Idempotent-Replayed" not in stalled
    assert retried.status_code == 201 and retried["Idempotent-Replayed"] == "true"
    assert retried.json() == stalled.json()
    assert keyed_events(gid) == [(4, "checkpoint.recorded")]
    assert IdempotencyRecord.objects.get(key=STORED).status_code == 201


def test_an_attempt_that_fails_before_its_commit_leaves_the_key_free(
        agent, clock, checkpoint, monkeypatch):
    """The record is written with the command's events or not at all: an
    attempt that dies inside its transaction (here: storing its answer
    fails) leaves neither, so its retry runs the command, once."""
    gid, path, body = checkpoint
    real = idempotency._complete

    def broken(*args):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(idempotency, "_complete", broken)
    with pytest.raises(RuntimeError):  # a 500 in production; the test client re-raises
        agent.post(path, body, key=KEY)
    assert keyed_events(gid) == []
    assert not IdempotencyRecord.objects.filter(key=STORED).exists()

    monkeypatch.setattr(idempotency, "_complete", real)
    retry = agent.post(path, body, key=KEY)
    assert retry.status_code == 201 and "Idempotent-Replayed" not in retry
    assert keyed_events(gid) == [(4, "checkpoint.recorded")]


def test_a_stalled_attempt_never_stores_a_refusal_over_the_answer(
        agent, clock, checkpoint, monkeypatch):
    """The first attempt stalls; its retry checkpoints and then the lease is
    released. Running its command now would be refused (lease_lost): the
    stalled attempt replays the recorded answer instead, and the record keeps
    it."""
    gid, path, body = checkpoint
    paused = Paused(idempotency._keyed, when="before")
    monkeypatch.setattr(idempotency, "_keyed", paused)
    first = Request(agent.token, path, body)
    first.start()
    assert paused.reached.wait(WAIT)
    assert agent.post(path, body, key=KEY).status_code == 201
    assert agent.post(f"goals/{gid}/lease/release", {"lease": body["lease"]}).status_code == 200
    paused.release.set()

    stalled = first.result()

    assert stalled.status_code == 201 and stalled["Idempotent-Replayed"] == "true"
    record = IdempotencyRecord.objects.get(key=STORED)
    assert record.status_code == 201 and '"lease_lost"' not in record.response


def test_one_key_sent_by_many_at_once_runs_once_and_logs_no_error(agent, clock, checkpoint):
    """Six requests with one key released together (a client retrying over
    several connections): one command, one event, the same answer six times,
    and on PostgreSQL no unique violation in the server's log (the claim is
    INSERT ... ON CONFLICT, waiting on the first attempt's row)."""
    gid, path, body = checkpoint
    log = server_log()
    offset = log.stat().st_size if log else 0
    answers = six_at_once(agent.token, path, body)

    assert [a.status_code for a in answers] == [201] * 6
    assert sum("Idempotent-Replayed" not in a for a in answers) == 1
    assert len({a.content for a in answers}) == 1
    assert keyed_events(gid) == [(4, "checkpoint.recorded")]
    assert errors_since(log, offset) == []


# ----------------------------------------------------------------- retention


@pytest.mark.parametrize("raw, message", [
    ("two days", "WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS='two days' is not a whole number"),
    ("0", "WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS=0 is below the minimum 1"),
])
def test_the_retention_setting_is_read_strictly(tmp_path, raw, message):
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={"DJANGO_SETTINGS_MODULE": "ledger.project.settings",
             "WAKELEDGER_VAR_DIR": str(tmp_path),
             "WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS": raw, "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=False, timeout=60,
    )
    assert result.returncode != 0
    assert message in result.stderr


def test_prune_follows_the_retention_setting(agent, clock, checkpoint, settings):
    settings.WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS = 2
    gid, path, body = checkpoint
    assert agent.post(path, body, key=KEY).status_code == 201
    clock.advance(hours=2)
    assert accounts.prune_idempotency_records() == 0  # exactly the retention old: kept
    clock.advance(seconds=1)
    assert accounts.prune_idempotency_records() == 1
    assert not IdempotencyRecord.objects.exists()
    assert keyed_events(gid) == [(4, "checkpoint.recorded")], "events are never pruned"


def test_one_key_sent_by_many_at_once_starts_one_goal(agent, clock):
    """The key is written after the command: the later attempts queue behind
    the first's start (SQLite's write lock; PostgreSQL's start lock), find its
    goal, then find the key taken and roll back whole, their own command's
    events with them. One goal, one answer six times, no unique violation in
    the server's log."""
    log = server_log()
    offset = log.stat().st_size if log else 0
    body = {"goal_key": "at-once", "workspace": "/srv/at-once", "objective": "one goal"}
    answers = six_at_once(agent.token, "goals", body)

    assert [a.status_code for a in answers] == [201] * 6
    assert sum("Idempotent-Replayed" not in a for a in answers) == 1
    assert len({a.content for a in answers}) == 1
    started = Event.objects.filter(kind="goal.started")
    assert started.count() == 1 and started.get().idempotency_key == STORED
    assert IdempotencyRecord.objects.filter(key=STORED).count() == 1
    assert errors_since(log, offset) == []
