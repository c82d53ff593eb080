"""Idempotency-Key on every POST: replay, conflict, in flight, per caller,
what the events keep, and pruning."""

import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection

from api import idempotency
from ledger.access import accounts
from ledger.access.models import IdempotencyRecord
from ledger.models import Event, Goal
from tests.factories import COMPLETED, lease_of

D = idempotency.key_digest  # what is stored of a key

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"


def without_lease_token(body):
    """What the record keeps: a granted lease's token is derived again on replay."""
    if isinstance(body.get("lease"), dict) and "token" in body["lease"]:
        return {**body, "lease": {**body["lease"], "token": idempotency.TOKEN_PLACEHOLDER}}
    return body
REPLAYED = "Idempotent-Replayed"
ON_POSTGRES = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")

NEW_GOAL = {"goal_key": "issue-77", "workspace": "/srv/repos/new", "objective": "Ship it",
            "next_actions": ["plan"]}



@pytest.fixture
def goal(agent, clock):
    """agent-1's running goal (started without a key) and its lease."""
    body = agent.start().json()
    return body["goal"]["id"], lease_of(body)


def snapshot() -> tuple:
    return (Event.objects.count(),
            list(Goal.objects.order_by("id").values_list("id", "version", "last_hash")))


def assert_replay(first, again) -> None:
    assert REPLAYED not in first
    assert again[REPLAYED] == "true"
    assert again.status_code == first.status_code
    assert again["Content-Type"] == first["Content-Type"]
    assert again.json() == first.json()


# ----------------------------------------------------------------- replay


def test_a_created_goal_is_replayed_with_its_201_and_its_lease(agent, clock):
    first = agent.post("goals", NEW_GOAL, key="start-1")
    assert first.status_code == 201 and first.json()["acquired"] is True
    before = snapshot()
    clock.advance(seconds=5)

    again = agent.post("goals", NEW_GOAL, key="start-1")

    assert_replay(first, again)
    assert again.json()["lease"]["token"] == first.json()["lease"]["token"]
    assert snapshot() == before
    # Without the key the same body is run again: the existing goal, no lease.
    rerun = agent.post("goals", NEW_GOAL)
    assert rerun.status_code == 200 and rerun.json()["created"] is False
    assert Goal.objects.count() == 1


def release_first(agent, gid, lease):
    assert agent.post(f"goals/{gid}/lease/release", {"lease": lease}).status_code == 200


# endpoint -> (path, body builder, expected status, preparation)
POSTS = {
    "goals": ("goals", lambda lease: NEW_GOAL, 201, None),
    "lease": ("goals/{gid}/lease", lambda lease: {}, 200, release_first),
    "heartbeat": ("goals/{gid}/lease/heartbeat", lambda lease: {"lease": lease}, 200, None),
    "release": ("goals/{gid}/lease/release", lambda lease: {"lease": lease}, 200, None),
    "checkpoints": ("goals/{gid}/checkpoints",
                    lambda lease: {"lease": lease, "current_step": "tests written",
                                   "progress_pct": 40, "release_lease": True}, 201, None),
    "finish": ("goals/{gid}/finish",
               lambda lease: {"lease": lease, **COMPLETED},
               200, None),
    "workspace/release": ("goals/{gid}/workspace/release", lambda lease: {"lease": lease},
                          200, None),
}


@pytest.mark.parametrize("endpoint", list(POSTS))
def test_every_post_replays_its_first_answer_and_appends_nothing(agent, goal, clock,
                                                                 endpoint):
    gid, lease = goal
    path, body, status, prepare = POSTS[endpoint]
    if prepare:
        prepare(agent, gid, lease)
    path = path.format(gid=gid)
    events_before = Event.objects.count()

    first = agent.post(path, body(lease), key=f"{endpoint}-1")
    assert first.status_code == status, first.content
    assert Event.objects.count() > events_before, "the first request recorded nothing"
    after_first = snapshot()
    # Time moves, so a re-run would answer differently (expiry times, preflight).
    clock.advance(seconds=7)

    again = agent.post(path, body(lease), key=f"{endpoint}-1")

    assert_replay(first, again)
    assert snapshot() == after_first
    record = IdempotencyRecord.objects.get(owner="agent-1", key=D(f"{endpoint}-1"))
    assert record.status_code == status
    assert json.loads(record.response) == without_lease_token(first.json())


def test_a_replay_is_byte_for_byte_the_first_response(agent, goal):
    gid, lease = goal
    body = {"lease": lease, "current_step": "tests written", "progress_pct": 40}
    first = agent.post(f"goals/{gid}/checkpoints", body, key="cp-bytes")
    again = agent.post(f"goals/{gid}/checkpoints", body, key="cp-bytes")
    assert again.status_code == first.status_code == 201
    assert again.content == first.content


def test_the_same_request_spelled_differently_is_still_a_replay(agent, clock):
    first = agent.post("goals", NEW_GOAL, key="spelling")
    respelled = json.dumps(dict(reversed(list(NEW_GOAL.items()))), indent=2).encode()
    again = agent.post("goals", raw=respelled, key="spelling")
    assert_replay(first, again)


def test_a_lease_lost_refusal_is_replayed_not_run_again(agent, goal, clock):
    gid, old = goal
    release_first(agent, gid, old)
    second = agent.post(f"goals/{gid}/lease").json()
    assert second["acquired"] is True and second["lease"]["generation"] == 2
    late = {"lease": old, "current_step": "late", "progress_pct": 10}
    before = snapshot()

    first = agent.post(f"goals/{gid}/checkpoints", late, key="late-1")
    assert first.status_code == 409 and first["Content-Type"] == PROBLEM
    assert first.json()["code"] == "lease_lost" and first.json()["current_generation"] == 2
    assert snapshot() == before

    # The world moves on: generation 3. A re-run would say so; a replay does not.
    release_first(agent, gid, lease_of(second))
    assert agent.post(f"goals/{gid}/lease").json()["lease"]["generation"] == 3
    moved = snapshot()

    again = agent.post(f"goals/{gid}/checkpoints", late, key="late-1")

    assert_replay(first, again)
    assert again.json()["current_generation"] == 2
    assert snapshot() == moved
    fresh = agent.post(f"goals/{gid}/checkpoints", late, key="late-2")
    assert fresh.json()["current_generation"] == 3 and REPLAYED not in fresh


def test_a_refused_start_is_replayed_even_once_it_would_succeed(agent, goal, clock):
    gid, lease = goal
    second_goal = {**NEW_GOAL, "workspace": "/srv/repos/shop"}  # bound to the first goal
    first = agent.post("goals", second_goal, key="second")
    assert first.status_code == 409 and first.json()["code"] == "workspace_bound"
    released = agent.post(f"goals/{gid}/workspace/release", {"lease": lease})
    assert released.status_code == 200

    again = agent.post("goals", second_goal, key="second")

    assert_replay(first, again)
    assert again["Content-Type"] == PROBLEM
    assert Goal.objects.count() == 1
    assert agent.post("goals", second_goal, key="third").status_code == 201


def test_a_validation_refusal_is_replayed_too(agent, goal):
    gid, lease = goal
    bad = {"lease": lease, "current_step": "x", "progress_pct": 101}
    first = agent.post(f"goals/{gid}/checkpoints", bad, key="bad")
    assert first.status_code == 400 and first.json()["code"] == "validation_error"
    again = agent.post(f"goals/{gid}/checkpoints", bad, key="bad")
    assert_replay(first, again)
    assert IdempotencyRecord.objects.get(key=D("bad")).status_code == 400


# ----------------------------------------------------------------- conflicts


def test_the_same_key_with_another_body_or_endpoint_is_422(agent, goal, clock):
    gid, lease = goal
    body = {"lease": lease, "current_step": "tests written", "progress_pct": 40}
    first = agent.post(f"goals/{gid}/checkpoints", body, key="cp-1")
    assert first.status_code == 201
    record = IdempotencyRecord.objects.values().get(key=D("cp-1"))
    before = snapshot()

    for path, other in ((f"goals/{gid}/checkpoints", {**body, "progress_pct": 41}),
                        (f"goals/{gid}/checkpoints", {**body, "note": ""}),
                        (f"goals/{gid}/lease/heartbeat", {"lease": lease}),
                        ("goals", NEW_GOAL)):
        refused = agent.post(path, other, key="cp-1")
        assert refused.status_code == 422, path
        assert refused["Content-Type"] == PROBLEM
        problem = refused.json()
        assert problem["code"] == "idempotency_conflict" and problem["status"] == 422
        assert REPLAYED not in refused

    assert snapshot() == before
    assert IdempotencyRecord.objects.values().get(key=D("cp-1")) == record
    assert_replay(first, agent.post(f"goals/{gid}/checkpoints", body, key="cp-1"))


def test_keys_are_per_caller(agent, other_agent, clock):
    mine = agent.post("goals", NEW_GOAL, key="shared-1")
    assert mine.status_code == 201
    token = mine.json()["lease"]["token"]

    # The same key and body from another agent is its own request: its own
    # goal (bindings are per agent), never agent-1's answer with agent-1's lease.
    theirs = other_agent.post("goals", NEW_GOAL, key="shared-1")
    assert theirs.status_code == 201 and theirs.json()["goal"]["agent"] == "agent-2"
    assert theirs.json()["goal"]["id"] != mine.json()["goal"]["id"]
    assert REPLAYED not in theirs and token not in theirs.content.decode()

    # The same key with another body is no conflict across callers.
    assert agent.post("goals", {**NEW_GOAL, "workspace": "/w/a"}, key="shared-2") \
        .status_code == 201
    other = other_agent.post("goals", {**NEW_GOAL, "workspace": "/w/b"}, key="shared-2")
    assert other.status_code == 201 and REPLAYED not in other
    assert set(IdempotencyRecord.objects.values_list("owner", "key")) == {
        ("agent-1", D("shared-1")), ("agent-2", D("shared-1")),
        ("agent-1", D("shared-2")), ("agent-2", D("shared-2"))}


# ----------------------------------------------------------------- in flight
#
# A record is written with its answer or not at all, so no key is ever "in
# flight" in the table. The one 409 idempotency_in_flight left is a key found
# taken whose record is gone when it is read (pruned in between).


def test_a_key_pruned_between_its_insert_and_its_read_asks_for_a_retry(agent, clock,
                                                                        monkeypatch):
    before = snapshot()
    real = idempotency._complete
    monkeypatch.setattr(idempotency, "_complete", lambda *args: False)  # found taken

    response = agent.post("goals", NEW_GOAL, key="pruned")

    assert response.status_code == 409 and response["Content-Type"] == PROBLEM
    problem = response.json()
    assert problem["code"] == "idempotency_in_flight" and problem["retry_after_seconds"] == 1
    assert response["Retry-After"] == "1"
    assert snapshot() == before  # the attempt's command was rolled back with it
    assert not IdempotencyRecord.objects.exists()

    monkeypatch.setattr(idempotency, "_complete", real)
    retry = agent.post("goals", NEW_GOAL, key="pruned")
    assert retry.status_code == 201 and REPLAYED not in retry
    assert_replay(retry, agent.post("goals", NEW_GOAL, key="pruned"))


def test_every_record_is_stored_with_its_answer(agent, goal, clock):
    """The record and its answer go in one statement: none without its
    status and body, and nothing else kept of the attempt."""
    gid, lease = goal
    assert agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "s",
                                                   "progress_pct": 10},
                      key="whole").status_code == 201
    assert agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "progress_pct": "x"},
                      key="refused").status_code == 400
    rows = list(IdempotencyRecord.objects.values())
    assert sorted(r["status_code"] for r in rows) == [201, 400]
    assert all(json.loads(r["response"]) for r in rows)
    assert set(rows[0]) == {"id", "owner", "key", "fingerprint", "status_code", "response",
                            "created_at"}
    assert IdempotencyRecord._meta.get_field("status_code").null is False


# ----------------------------------------------------------------- the events


def test_the_key_is_stored_on_every_event_the_request_appended(agent, clock):
    started = agent.post("goals", NEW_GOAL, key="start-7")
    gid, lease = started.json()["goal"]["id"], lease_of(started.json())
    keys = dict(Event.objects.filter(goal_id=gid).values_list("kind", "idempotency_key"))
    assert keys == {"goal.started": D("start-7"), "workspace.bound": D("start-7"),
                    "lease.acquired": D("start-7")}

    cp = {"lease": lease, "current_step": "a", "progress_pct": 10}
    agent.post(f"goals/{gid}/checkpoints", cp)
    agent.post(f"goals/{gid}/checkpoints", {**cp, "progress_pct": 20, "release_lease": True},
               key="cp-last")
    tail = list(Event.objects.filter(goal_id=gid, seq__gt=3).order_by("seq")
                .values_list("kind", "idempotency_key"))
    # The release left the goal with no watchdog: the same command arms it.
    assert tail == [("checkpoint.recorded", None), ("checkpoint.recorded", D("cp-last")),
                    ("lease.released", D("cp-last")), ("wake.scheduled", D("cp-last")),
                    ("receipt.recorded", D("cp-last"))]


# ----------------------------------------------------------------- invalid keys


@pytest.mark.parametrize("key", ["", "k" * 256, "k" * 300, "schlüssel", "ключ", "tab\there",
                                 "bell\x07"], ids=["empty", "256 chars", "300 chars",
                                                   "latin-1", "cyrillic", "tab", "control"])
def test_an_invalid_key_is_400_and_nothing_runs(agent, clock, key):
    before = snapshot()
    response = agent.client.post("/api/v1/goals", NEW_GOAL, format="json",
                                 HTTP_IDEMPOTENCY_KEY=key)
    assert response.status_code == 400 and response["Content-Type"] == PROBLEM
    problem = response.json()
    assert problem["code"] == "validation_error" and problem["status"] == 400
    assert "Idempotency-Key" in problem["detail"]
    assert snapshot() == before
    assert not IdempotencyRecord.objects.exists()


def test_a_key_of_255_printable_ascii_characters_is_accepted(agent, clock):
    key = ("~ !#-./09:@AZ[`az{" * 15)[:255]
    first = agent.post("goals", NEW_GOAL, key=key)
    assert first.status_code == 201
    assert_replay(first, agent.post("goals", NEW_GOAL, key=key))


# ----------------------------------------------------------------- pruning


def test_prune_deletes_only_records_older_than_48_hours(agent, clock):
    start = clock()
    assert agent.post("goals", {**NEW_GOAL, "workspace": "/w/old"}, key="old") \
        .status_code == 201
    clock.advance(hours=47)
    assert agent.post("goals", {**NEW_GOAL, "workspace": "/w/new"}, key="new") \
        .status_code == 201
    clock.advance(hours=1)  # "old" is exactly 48 h old: kept

    assert accounts.prune_idempotency_records() == 0
    clock.advance(seconds=1)
    assert accounts.prune_idempotency_records() == 1
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == [D("new")]
    assert Event.objects.filter(idempotency_key=D("old")).exists(), "events are never pruned"

    # A pruned key is free again: another body under it is no conflict.
    reused = agent.post("goals", {**NEW_GOAL, "workspace": "/w/again"}, key="old")
    assert reused.status_code == 201 and REPLAYED not in reused
    # An explicit "now" is honoured.
    assert accounts.prune_idempotency_records(now=start + timedelta(hours=200)) == 2
    assert not IdempotencyRecord.objects.exists()


# ----------------------------------------------------------------- secrets


def test_a_replayable_lease_grant_keeps_no_raw_lease_token_in_the_database(agent, clock):
    token = agent.post("goals", NEW_GOAL, key="start-secret").json()["lease"]["token"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM api_idempotencyrecord")
        table = repr(cursor.fetchall())
    assert token.startswith("wll_")
    assert token not in table and token.removeprefix("wll_") not in table


# ----------------------------------------------------------------- imports


def test_api_modules_import_on_their_own():
    code = "import django; django.setup(); import api.idempotency"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-500:]


# ------------------------------------------------------------------ the key stored as its digest


def test_an_idempotency_key_is_stored_and_shown_as_its_digest_and_scanned(agent, auditor,
                                                                         clock):
    import hashlib

    from ledger.models import Event, IdempotencyRecord
    from tests.helpers import staff

    key = "my-run-7f3a"
    started = agent.post("goals", {"goal_key": "k", "workspace": "/srv/k", "objective": "o"},
                         key=key)
    assert started.status_code == 201
    gid = started.json()["goal"]["id"]
    digest = "sha256:" + hashlib.sha256(key.encode()).hexdigest()
    assert set(Event.objects.filter(goal_id=gid).values_list("idempotency_key", flat=True)) \
        == {digest}
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == [digest]
    event = Event.objects.filter(goal_id=gid).first()
    page = staff("auditor-24", "auditor").get(
        f"/admin/ledger/event/{event.pk}/change/").content.decode()
    assert key not in page and digest in page
    # The same key still replays; a key that is a credential is refused.
    again = agent.post("goals", {"goal_key": "k", "workspace": "/srv/k", "objective": "o"},
                       key=key)
    assert again["Idempotent-Replayed"] == "true"
    refused = agent.post("goals", {"goal_key": "k2", "workspace": "/srv/k2",
                                   "objective": "o"}, key="ghp_" + "A" * 36)
    assert refused.status_code == 400 and refused.json()["code"] == "validation_error"
    assert "credential" in refused.json()["detail"]


@pytest.mark.django_db(transaction=True)
def test_a_keyed_command_runs_in_the_keys_transaction_without_a_savepoint(agent, goal):
    """The command and the key with its answer commit together or not at
    all, so the command takes no savepoint of its own (caller.run joins it); a
    refusal the service answers and goes on from (a lease held by another)
    still leaves that transaction usable, and is stored and replayed. The key
    costs one statement, after the command: the insert of the key with its
    answer."""
    from django.test.utils import CaptureQueriesContext

    gid, lease = goal
    body = {"lease": lease, "current_step": "tests written", "progress_pct": 40}
    with CaptureQueriesContext(connection) as queries:
        first = agent.post(f"goals/{gid}/checkpoints", body, key="whole-1")
    assert first.status_code == 201
    assert not [q for q in queries.captured_queries if "SAVEPOINT" in q["sql"].upper()]
    keyed = [q["sql"] for q in queries.captured_queries if IdempotencyRecord._meta.db_table
             in q["sql"]]
    assert len(keyed) == 1 and keyed[0].lstrip().upper().startswith("INSERT"), keyed
    assert IdempotencyRecord.objects.get(key=D("whole-1")).status_code == 201
    before = snapshot()
    held = agent.post(f"goals/{gid}/lease", {}, key="held-1")
    assert held.status_code == 200 and held.json()["acquired"] is False, held.json()
    assert IdempotencyRecord.objects.filter(key=D("held-1")).exists()
    assert_replay(held, agent.post(f"goals/{gid}/lease", {}, key="held-1"))
    assert snapshot() == before


@pytest.mark.django_db(transaction=True)
def test_an_idempotency_key_costs_one_round_trip_on_postgresql(agent, goal):
    """The key and its answer are one statement after the command, so the
    command's own BEGIN-with-the-locked-read still opens the transaction:
    a keyed checkpoint costs the unkeyed one's round trips plus one. (With
    the claim first, psycopg sent a BEGIN of its own for it: plus three.)
    Counted from libpq's trace of what the client sent: a simple Query, or
    one extended-protocol Sync, is one round trip."""
    if connection.vendor != "postgresql":
        pytest.skip("round trips are PostgreSQL's (SQLite's statements: the test above)")
    import tempfile

    from psycopg import pq

    gid, lease = goal
    body = {"lease": lease, "current_step": "tests written", "progress_pct": 40}

    def round_trips(key: str | None) -> int:
        connection.ensure_connection()
        pgconn = connection.connection.pgconn
        with tempfile.TemporaryFile("w+") as trace:
            pgconn.trace(trace.fileno())
            pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
            try:
                assert agent.post(f"goals/{gid}/checkpoints", body, key=key).status_code == 201
            finally:
                pgconn.untrace()
            trace.seek(0)
            sent = [line.split("\t")[2].split(" ")[0] for line in trace.read().splitlines()
                    if line.startswith("F\t")]
        return sent.count("Query") + sent.count("Sync")

    round_trips("warm-up")  # the first request of a connection may ask more
    assert round_trips("trips-1") == round_trips(None) + 1


def test_a_duplicate_whose_command_fails_still_gets_the_stored_answer(agent, goal,
                                                                      monkeypatch):
    """The key is found taken only after the command: a duplicate whose
    command now fails with a 5xx answers with what is stored under the key;
    a new key's 5xx is stored nowhere and answered as it is."""
    from api.problems import Problem
    from api.views import work as views

    gid, lease = goal
    body = {"lease": lease, "current_step": "tests written", "progress_pct": 40}
    first = agent.post(f"goals/{gid}/checkpoints", body, key="fails-later")
    assert first.status_code == 201

    def broken(*args, **kwargs):
        raise Problem("internal_error", "the command broke")

    monkeypatch.setattr(views.work, "checkpoint", broken)
    assert_replay(first, agent.post(f"goals/{gid}/checkpoints", body, key="fails-later"))
    fresh = agent.post(f"goals/{gid}/checkpoints", body, key="fails-now")
    assert fresh.status_code == 500
    assert not IdempotencyRecord.objects.filter(key=D("fails-now")).exists()
