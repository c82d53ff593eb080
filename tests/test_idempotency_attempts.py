"""Issue 10, item 4: an Idempotency-Key's record is owned by one attempt at a
time, and only the owner's events commit.

Two real requests on two threads (two database connections); the first is
paused with a threading.Event and the frozen clock moved past LOCK_SECONDS,
so the retry may take the key over."""

import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from rest_framework.test import APIClient

from api import idempotency
from api.models import IdempotencyRecord
from ledger.models import Event

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "cp-stall"
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
    return list(Event.objects.filter(goal_id=gid, idempotency_key=KEY).order_by("seq")
                .values_list("seq", "kind"))


def test_an_attempt_stalled_past_its_lock_commits_nothing_beside_the_retry(
        agent, clock, checkpoint, monkeypatch):
    """The first attempt takes the key and stalls before its command runs (a
    paused process); 61 s later the retry takes the key over and records the
    checkpoint. The first attempt then wakes, runs the command and cannot
    store its answer, so its events roll back and its caller gets a 409."""
    gid, path, body = checkpoint
    paused = Paused(idempotency._begin, when="after")
    monkeypatch.setattr(idempotency, "_begin", paused)
    first = Request(agent.token, path, body)
    first.start()
    assert paused.reached.wait(WAIT)
    clock.advance(seconds=idempotency.LOCK_SECONDS + 1)

    retry = agent.post(path, body, key=KEY)
    assert retry.status_code == 201 and "Idempotent-Replayed" not in retry
    paused.release.set()
    stalled = first.result()

    assert stalled.status_code == 409 and stalled["Content-Type"] == "application/problem+json"
    assert stalled.json()["code"] == "idempotency_in_flight"
    assert "nothing from this attempt was recorded" in stalled.json()["detail"]
    assert keyed_events(gid) == [(4, "checkpoint.recorded")]
    record = IdempotencyRecord.objects.get(owner="agent-1", key=KEY)
    assert record.status_code == 201
    # The stalled caller's retry gets the answer that was recorded.
    again = agent.post(path, body, key=KEY)
    assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"
    assert again.json() == retry.json()
    assert keyed_events(gid) == [(4, "checkpoint.recorded")]


def test_an_attempt_stalled_inside_its_transaction_commits_nothing_beside_the_retry(
        agent, clock, checkpoint, monkeypatch, vendor):
    """The first attempt has appended its events and stalls before storing its
    answer, still holding the goal's row lock (a slow database). The retry
    comes 61 s later.

    PostgreSQL: the retry takes the key over, then waits for the goal's lock;
    the first attempt's conditional UPDATE finds the key taken, so it rolls
    back, and the retry records the checkpoint once.
    SQLite: the first attempt holds the database's write lock, so the retry
    cannot even look at the key until it commits; it then replays its answer."""
    gid, path, body = checkpoint
    paused = Paused(idempotency._complete, when="before")
    monkeypatch.setattr(idempotency, "_complete", paused)
    first = Request(agent.token, path, body)
    first.start()
    assert paused.reached.wait(WAIT)
    taken = IdempotencyRecord.objects.values_list("attempt", "locked_until").get(key=KEY)
    clock.advance(seconds=idempotency.LOCK_SECONDS + 1)

    retry = Request(agent.token, path, body)
    retry.start()
    if vendor == "postgresql":
        # The retry's takeover commits before it queues for the goal's lock.
        deadline = time.monotonic() + WAIT
        while IdempotencyRecord.objects.values_list(
                "attempt", "locked_until").get(key=KEY) == taken:
            assert time.monotonic() < deadline, "the retry never took the key over"
            time.sleep(0.02)
    else:
        time.sleep(0.3)  # let the retry queue for the write lock
    paused.release.set()
    stalled, retried = first.result(), retry.result()

    assert keyed_events(gid) == [(4, "checkpoint.recorded")]
    if vendor == "postgresql":
        assert stalled.status_code == 409
        assert stalled.json()["code"] == "idempotency_in_flight"
        assert retried.status_code == 201 and "Idempotent-Replayed" not in retried
    else:
        assert stalled.status_code == 201
        assert retried.status_code == 201 and retried["Idempotent-Replayed"] == "true"
        assert retried.json() == stalled.json()
    assert IdempotencyRecord.objects.get(key=KEY).status_code == 201


def test_a_refusal_of_a_stalled_attempt_is_not_stored_over_the_retrys_answer(
        agent, clock, checkpoint, monkeypatch):
    """A command that refuses (here: a lease no longer valid) is stored as the
    answer too; a superseded attempt's refusal is not."""
    gid, path, body = checkpoint
    paused = Paused(idempotency._begin, when="after")
    monkeypatch.setattr(idempotency, "_begin", paused)
    first = Request(agent.token, path, body)
    first.start()
    assert paused.reached.wait(WAIT)
    clock.advance(seconds=idempotency.LOCK_SECONDS + 1)
    retry = agent.post(path, body, key=KEY)
    assert retry.status_code == 201
    # The goal moves on before the stalled attempt wakes: its lease is gone.
    assert agent.post(f"goals/{gid}/lease/release", {"lease": body["lease"]}).status_code == 200
    paused.release.set()

    stalled = first.result()

    assert stalled.status_code == 409 and stalled.json()["code"] == "idempotency_in_flight"
    record = IdempotencyRecord.objects.get(key=KEY)
    assert record.status_code == 201 and '"lease_lost"' not in record.response


def test_a_record_pruned_under_a_running_attempt_rolls_it_back(agent, clock, checkpoint,
                                                               monkeypatch, settings):
    """Nothing can complete a record that is gone: the attempt's events go too."""
    gid, path, body = checkpoint
    paused = Paused(idempotency._begin, when="after")
    monkeypatch.setattr(idempotency, "_begin", paused)
    first = Request(agent.token, path, body)
    first.start()
    assert paused.reached.wait(WAIT)
    retention = timedelta(hours=settings.WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS, seconds=1)
    assert idempotency.prune(now=clock() + retention) == 1
    paused.release.set()

    assert first.result().status_code == 409
    assert keyed_events(gid) == []


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
        env={"DJANGO_SETTINGS_MODULE": "ledger.settings", "WAKELEDGER_VAR_DIR": str(tmp_path),
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
    assert idempotency.prune() == 0  # exactly the retention old: kept
    clock.advance(seconds=1)
    assert idempotency.prune() == 1
    assert not IdempotencyRecord.objects.exists()
    assert keyed_events(gid) == [(4, "checkpoint.recorded")], "events are never pruned"
