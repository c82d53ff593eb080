"""A write that cannot get the database in time (WAKELEDGER_DB_WAIT_SECONDS)
is a clear answer over real HTTP: 503 ``database_busy`` with Retry-After,
nothing recorded, and the same request with the same Idempotency-Key
recorded once afterwards. The SQLite file is write-locked by a second
connection, as a backup, a migration or a stuck process would hold it."""

import json
import sqlite3
import urllib.error
import urllib.request
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from ledger.eventstore import busy
from ledger.models import Goal
from tests.factories import kinds, start_goal
from tests.helpers import transaction_held_open

pytestmark = pytest.mark.django_db(transaction=True)
sqlite_only = pytest.mark.skipif("connection.vendor != 'sqlite'")


def post(url: str, token: str, body: dict[str, Any], key: str) -> tuple[int, Any, dict]:
    request = urllib.request.Request(  # noqa: S310 (the live server)
        url, data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                 "Idempotency-Key": key})
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:  # noqa: S310
            return answer.status, answer.headers, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, error.headers, json.loads(error.read())


def write_locked() -> sqlite3.Connection:
    """A second connection holding SQLite's write lock (not the ledger's queue)."""
    locker = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None, timeout=0)
    locker.execute("BEGIN IMMEDIATE")
    return locker


@sqlite_only
def test_a_write_on_a_locked_database_is_503_and_its_retry_is_recorded_once(live_server,
                                                                            agent):
    gid, lease = start_goal(agent)
    url = f"{live_server.url}/api/v1/goals/{gid}/checkpoints"
    body = {"lease": lease, "current_step": "tests pass locally", "progress_pct": 40}
    locker = write_locked()
    try:
        status, headers, problem = post(url, agent.token, body, key="cp-1")
    finally:
        locker.rollback()
        locker.close()
    assert status == 503, problem
    assert problem["code"] == "database_busy" and problem["status"] == 503
    assert headers["Retry-After"] == str(settings.WAKELEDGER_DB_WAIT_SECONDS)
    assert headers["Content-Type"] == "application/problem+json"
    assert "locked" not in problem["detail"]  # the driver's text stays in the log
    assert "checkpoint.recorded" not in kinds(gid)
    status, _, answer = post(url, agent.token, body, key="cp-1")
    assert status in (200, 201), answer
    assert post(url, agent.token, body, key="cp-1")[0] == status  # replayed
    assert kinds(gid).count("checkpoint.recorded") == 1


def test_a_goal_a_stalled_writer_holds_is_503_and_goes_on_after(agent):
    """Another of the ledger's own writers holds the goal (its row lock on
    PostgreSQL, the queue and the write lock on SQLite) past the bound: the
    command is refused 503 and the goal goes on once the writer ends. On
    SQLite the request waits the bound once, in the writers' queue, then looks
    at SQLite's lock without a second wait; on PostgreSQL lock_timeout ends it."""
    gid, lease = start_goal(agent)
    body = {"lease": lease, "current_step": "bisecting", "progress_pct": 10}
    with transaction_held_open(lambda: Goal.objects.select_for_update().get(pk=gid)):
        refused = agent.post(f"goals/{gid}/checkpoints", body, key="held-1")
    assert refused.status_code == 503, refused.json()
    assert refused.json()["code"] == "database_busy"
    assert refused["Retry-After"] == str(busy.wait_seconds())
    answered = agent.post(f"goals/{gid}/checkpoints", body, key="held-1")
    assert answered.status_code in (200, 201), answered.json()
    assert kinds(gid).count("checkpoint.recorded") == 1
    if connection.vendor == "sqlite":  # the one bound's busy timeout is back
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA busy_timeout")
            assert cursor.fetchone()[0] == busy.wait_seconds() * 1000
