"""Replay and scheduler speed: the faster reading paths must still
find what the slower ones found, and django-q2's scheduler pass must read its
due rows through an index (docs/decisions.md, "Performance and speed")."""

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.domain import RecordCheckpoint
from ledger.eventstore import chain, projection, store, triggers
from ledger.models import Event, Goal
from tests.factories import GoalFactory, lease_of, proof_of

SCHEDULE_INDEXES = {"wakeledger_q_schedule_next_run": ["next_run"],
                    "wakeledger_q_schedule_name": ["name"]}


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of two goals, fetches of three rows, goal rows two a chunk: a
    handful of goals crosses every batch, chunk and group boundary."""
    monkeypatch.setattr(projection, "BATCH", 2)
    monkeypatch.setattr(projection, "CHUNK", 3)
    monkeypatch.setattr(projection, "GOAL_CHUNK", 2)


@pytest.fixture
def goals(db, small_batches):
    return [GoalFactory(checkpoints=n % 4, finish="completed" if n == 2 else None)
            for n in range(7)]


def tamper(sql: str, *params) -> None:
    triggers.drop(connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, list(params))
    triggers.install(connection)


def db_pk(goal: Goal):
    return Goal._meta.pk.get_db_prep_value(goal.pk, connection)


# ------------------------------------------------------------------ replay


def test_replay_of_many_goals_finds_exactly_the_injected_difference(goals):
    assert list(projection.replay(projection.goal_ids())) == []
    victim = goals[5]
    Goal.objects.filter(pk=victim.pk).update(status="done",
                                             state={**victim.state, "progress_pct": 77})

    reports = list(projection.replay(projection.goal_ids()))

    assert [r.goal_id for r in reports] == [str(victim.pk)]
    fields = {d.field: (d.stored, d.replayed) for d in reports[0].differences}
    assert fields["status"] == ("done", victim.status)
    assert fields["state.progress_pct"] == (77, victim.state["progress_pct"])


def test_replay_fix_of_many_goals_repairs_only_the_difference(goals):
    victim = goals[3]
    Goal.objects.filter(pk=victim.pk).update(state={**victim.state, "current_step": "x"})
    [report] = projection.replay(projection.goal_ids(), fix=True)
    assert report.fixed and report.goal_id == str(victim.pk)
    assert Goal.objects.get(pk=victim.pk).state == victim.state
    assert list(projection.replay(projection.goal_ids())) == []


def test_replay_reports_a_goal_with_no_events_among_many(goals):
    victim = goals[4]
    tamper("DELETE FROM ledger_event WHERE goal_id = %s", db_pk(victim))
    reports = list(projection.replay(projection.goal_ids()))
    assert [(r.goal_id, r.differences[0].field) for r in reports] == [(str(victim.pk),
                                                                       "events")]


def test_replay_accepts_any_spelling_of_a_goal_id(goals):
    """The stream maps its rows back to the ids it was given."""
    victim = goals[1]
    spelled = victim.pk.hex.upper()
    assert list(projection.replay([spelled])) == []


# ------------------------------------------------------------------ verify


def test_verify_of_many_goals_finds_a_truncation(goals):
    victim = goals[6]
    tamper("DELETE FROM ledger_event WHERE goal_id = %s AND seq = %s", db_pk(victim),
           victim.version)

    reports = {r.goal_id: r for r in projection.verify(projection.goal_ids())}

    assert len(reports) == len(goals)
    broken = {gid: r.broken for gid, r in reports.items() if r.broken}
    assert list(broken) == [str(victim.pk)]
    assert broken[str(victim.pk)].seq == victim.version
    assert "the chain ends at seq" in broken[str(victim.pk)].why
    for goal in goals:
        if goal is not victim:
            assert reports[str(goal.pk)].events == goal.version


def test_verify_of_many_goals_finds_an_edited_event(goals):
    victim = goals[1]
    tamper("UPDATE ledger_event SET actor = %s WHERE goal_id = %s AND seq = %s", "mallory",
           db_pk(victim), 2)
    broken = [r for r in projection.verify(projection.goal_ids()) if r.broken]
    assert [(r.goal_id, r.broken.seq) for r in broken] == [(str(victim.pk), 2)]


def test_streamed_rows_are_what_the_orm_reads(db, clock, small_batches):
    """Driver rows decoded by hand equal the ORM's values, field for field:
    data decoded, recorded_at aware and equal (the frozen clock's whole
    second included: SQLite stores it without a fraction)."""
    goal = GoalFactory(checkpoints=2)
    clock.advance(seconds=1.25)
    state = store.load(str(goal.pk))
    store.execute(str(goal.pk), RecordCheckpoint(current_step="later", progress_pct=50,
                                                 proof=proof_of(state)), actor="agent-1")
    orm = list(Event.objects.filter(goal=goal).order_by("seq")
               .values_list(*projection.VERIFY_FIELDS))
    streamed = list(projection._decoded([str(goal.pk)], projection.VERIFY_FIELDS))
    assert streamed == orm
    assert {row[4].microsecond for row in streamed} == {0, 250_000}
    assert all(row[4].utcoffset() == timedelta(0) for row in streamed)
    grouped = [(goal_id, list(rows)) for goal_id, rows in
               projection._grouped([str(goal.pk)], *projection.REPLAY_FIELDS)]
    assert grouped == [(str(goal.pk), [(k, d, t, h) for _, k, d, _, t, _, h in orm])]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_canonical_json_is_the_json_dumps_spelling_byte_for_byte(value):
    assert chain.canonical_json(value) == json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def test_canonical_json_still_refuses_nan():
    with pytest.raises(ValueError):
        chain.canonical_json({"x": float("nan")})


# ------------------------------------------------------------------ scheduler


def test_the_schedule_indexes_exist_after_migrate(db):
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "django_q_schedule")
    for name, columns in SCHEDULE_INDEXES.items():
        assert constraints[name]["columns"] == columns
        assert constraints[name]["index"]



def test_an_append_writes_only_the_event_indexes_a_read_needs(db):
    """(goal, seq) and kind: an index of the goal alone would repeat the
    first column of (goal, seq) and be written on every append."""
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "ledger_event")
    indexed = sorted(tuple(c["columns"]) for c in constraints.values()
                     if (c["index"] or c["unique"]) and not c["primary_key"])
    assert indexed == [("goal_id", "seq"), ("kind",)]


def test_sqlite_appends_do_not_rewrite_sqlite_sequence(db):
    """No AUTOINCREMENT on the events: it costs a page per append and buys
    nothing for rows that are never deleted."""
    if connection.vendor != "sqlite":
        pytest.skip("AUTOINCREMENT is SQLite's")
    with connection.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE name = 'ledger_event'")
        (table_sql,) = cursor.fetchone()
    assert "AUTOINCREMENT" not in table_sql.upper()
    first, second = GoalFactory(checkpoints=2), GoalFactory(checkpoints=2)
    ids = {goal: list(Event.objects.filter(goal=goal).order_by("seq")
                      .values_list("id", flat=True)) for goal in (first, second)}
    # Still one global position: growing within a goal, and the later goal's
    # events after the earlier one's.
    assert ids[first] == sorted(ids[first]) and ids[second] == sorted(ids[second])
    assert max(ids[first]) < min(ids[second])


def plan(sql: str) -> str:
    prefix = "EXPLAIN QUERY PLAN " if connection.vendor == "sqlite" else "EXPLAIN "
    with connection.cursor() as cursor:
        cursor.execute(prefix + sql)
        return "\n".join(" ".join(str(c) for c in row) for row in cursor.fetchall())


@pytest.mark.django_db(transaction=True)
def test_the_scheduler_pass_reads_its_due_rows_through_the_next_run_index():
    """The very SELECT django-q2's scheduler() runs, captured and explained."""
    from django_q.brokers import get_broker
    from django_q.models import OrmQ, Schedule
    from django_q.scheduler import scheduler

    now = datetime.now(UTC)
    Schedule.objects.all().delete()  # the sweeper's and the pruner's, due at once
    Schedule.objects.bulk_create(
        Schedule(name=f"bench-{i}", func="scheduling.tasks.fire_watchdog",
                 args=repr(str(uuid.uuid4())), schedule_type=Schedule.MINUTES, minutes=60,
                 repeats=-1, next_run=now + (timedelta(minutes=-1) if i < 20 else
                                             timedelta(minutes=30 + i % 30)))
        for i in range(3000))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")

    with CaptureQueriesContext(connection) as queries:
        scheduler(get_broker())

    assert OrmQ.objects.count() == 20
    [due] = [q["sql"] for q in queries.captured_queries
             if q["sql"].lstrip().upper().startswith("SELECT")
             and "django_q_schedule" in q["sql"] and "next_run" in q["sql"].split("WHERE")[-1]]
    explained = plan(due.replace(" FOR UPDATE", ""))
    assert "wakeledger_q_schedule_next_run" in explained, explained
    if connection.vendor == "sqlite":
        assert "SCAN django_q_schedule" not in explained  # no full read ...
        assert "TEMP B-TREE" not in explained  # ... and no sort: the index is in order
    else:
        assert "Seq Scan" not in explained


def test_a_pulled_wake_leaves_the_outbox_alone(agent, clock):
    """Dispatcher "none": the claim writes no outbox row, so firing it
    queries no outbox row either (and is still a claim, once)."""
    from scheduling import tasks

    body = agent.start(policy={"lease_seconds": 300, "cadence_minutes": 60}).json()
    gid = body["goal"]["id"]
    agent.post(f"goals/{gid}/watchdog", {"lease": lease_of(body)})
    clock.advance(minutes=6)
    assert tasks.sweep_leases() == 1
    clock.advance(minutes=54)
    due = (clock() - timedelta(seconds=1)).isoformat()

    with CaptureQueriesContext(connection) as queries:
        assert tasks.fire_watchdog(gid, intended_date=due) == "ready_for_pull"

    assert not [q for q in queries.captured_queries if "scheduling_dispatch" in q["sql"]]
    assert tasks.fire_watchdog(gid, intended_date=due) == "already_claimed"
