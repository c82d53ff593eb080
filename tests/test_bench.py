"""The benchmark suite's arithmetic (bench/common.py) and the floor's SQL
(bench/floor.py): the figures in var/bench/latest.json are only as honest as
these helpers."""

import dataclasses
import json
from dataclasses import asdict
from datetime import datetime

import pytest

from bench.common import Row, emit, interleaved, percentile_ms

FIELDS = {"name", "value", "unit", "baseline", "baseline_value", "ratio", "p50_ms", "p99_ms",
          "n", "reps"}


def test_percentiles_are_nearest_rank_in_milliseconds():
    seconds = [i / 1000 for i in range(1, 101)]  # 1 .. 100 ms
    assert percentile_ms(seconds, 50) == 50
    assert percentile_ms(seconds, 99) == 99
    assert percentile_ms([0.007], 99) == 7
    assert percentile_ms([], 50) is None


def test_interleaved_alternates_sides_and_takes_the_median_of_per_round_ratios():
    calls = []
    ours = iter([10.0, 30.0, 20.0, 40.0, 50.0])
    base = iter([10.0, 10.0, 10.0, 20.0, 100.0])

    def side(name, values):
        def run():
            calls.append(name)
            return next(values)
        return run

    value, baseline, ratio = interleaved(5, side("ours", ours), side("base", base))
    # The side that goes first changes every round.
    assert calls == ["base", "ours", "ours", "base", "base", "ours", "ours", "base",
                     "base", "ours"]
    assert (value, baseline) == (30.0, 10.0)
    # Per-round ratios 1, 3, 2, 2, 0.5: their median, not a ratio of medians (3).
    assert ratio == 2.0


def test_emit_writes_every_field_of_every_row(tmp_path):
    out = tmp_path / "rows.json"
    row = Row(name="append sqlite: x", value=1.0, unit="events/s", baseline="raw",
              baseline_value=2.0, ratio=0.5, p50_ms=1.0, p99_ms=2.0, n=10, reps=5)
    emit([row], out)
    [written] = json.loads(out.read_text())
    assert set(written) == FIELDS
    assert written == asdict(row)


def test_a_wake_is_late_only_once_its_claim_misses_the_look_after_the_one_that_found_it():
    from bench.capacity import LOOK, fire_bound

    # 7 December 2026, 24,000 agents on PostgreSQL: the slot an interval after
    # the turn's end, a look 30.3 s later, the look's ~200 claims done 2.4 s
    # after it. The old bound (an hour + 30 s + a 5 s poll, the poll counted
    # from the claim) called such wakes late; none of it is the server behind.
    worst_seen = 60.0 + 30.3 + 2.4
    assert worst_seen > 60 + 30
    assert worst_seen <= fire_bound(60)
    # A qcluster that has not claimed a look's wakes by the next look is behind.
    assert fire_bound(60) < 60.0 + 2 * LOOK + 0.5
    # The interval is compressed; the looks are not.
    assert fire_bound(30) == 120 + 2 * LOOK


def test_wakelag_reads_the_scheduler_log_into_passes(tmp_path):
    from bench.wakelag import passes, percentiles, scheduler_lines

    goal = "6f1c2a9e-0000-4000-8000-000000000001"
    other = "6f1c2a9e-0000-4000-8000-000000000002"
    lines = [
        f"2026-12-07 06:46:36,100 INFO django_q.scheduler [-] Process-1 created task "
        f"alpha-bravo from schedule [wakeledger-watchdog-{goal}]",
        f"2026-12-07 06:46:36,140 INFO django_q.scheduler [-] Process-1 created task "
        f"charlie-delta from schedule [wakeledger-watchdog-{other}]",
        "2026-12-07 06:46:50,000 INFO ledger.scheduling wake ... for goal: ready_for_pull",
        "2026-12-07 06:46:51,000 INFO django_q.scheduler [-] Process-1 created task "
        "echo-foxtrot from schedule [wakeledger-sweeper]",
        f"2026-12-07 06:47:07,000 INFO django_q.scheduler [-] Process-1 created task "
        f"golf-hotel from schedule [wakeledger-watchdog-{goal}]",
    ]
    log = tmp_path / "scheduler.log"
    log.write_text("\n".join(lines) + "\n")
    created = scheduler_lines(log)
    assert sorted(created) == [goal, other]  # watchdogs only: not the sweeper
    assert len(created[goal]) == 2
    found = passes(created)
    assert [(p["schedules"], p["seconds"]) for p in found] == [(2, 0.04), (1, 0.0)]
    assert scheduler_lines(tmp_path / "missing.log") == {}
    assert percentiles([3.0, 1.0, 2.0]) == {"n": 3, "p50": 2.0, "p99": 3.0, "max": 3.0}
    assert percentiles([]) == {}


def test_wakelag_splits_a_pulled_wake_into_its_stages(agent, started, clock, tmp_path):
    """An end of turn, the watchdog's slot an interval later, django-q2's
    task made 18 s after the slot, the claim 2 s later, the pull 3 s after
    that: each stage read back from the ledger, the task row and the log."""
    from datetime import timedelta

    from django_q.models import Task

    from bench.wakelag import measure
    from ledger.models import Goal
    from scheduling import tasks

    gid, lease = started(cadence_minutes=60)
    since = clock()
    clock.advance(seconds=10)
    released = clock()
    assert agent.post(f"goals/{gid}/lease/release", {"lease": lease}).status_code == 200
    due = datetime.fromisoformat(Goal.objects.get(pk=gid).state["watchdog"]["next_due_at"])
    assert due == released + timedelta(hours=1)  # armed at the release, an interval on
    created = due + timedelta(seconds=18)
    Task.objects.create(id="t" * 32, name="x", func="scheduling.tasks.fire_watchdog",
                        args=(gid,), kwargs={"intended_date": due.isoformat()},
                        started=created, stopped=created, success=True)
    log = tmp_path / "scheduler.log"
    local = created.astimezone().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    log.write_text(f"{local} INFO django_q.scheduler [-] created task a-b from schedule "
                   f"[wakeledger-watchdog-{gid}]\n")
    clock.advance(seconds=(created - clock()).total_seconds() + 2)
    assert tasks.fire_watchdog(gid, intended_date=due.isoformat()) == "ready_for_pull"
    clock.advance(seconds=3)
    assert agent.post(f"goals/{gid}/lease", {}).json()["acquired"] is True

    report = measure(since, log)
    assert report["wakes"] == 1 and report["busy_claims_after_release"] == 0
    [wake] = report["worst"]
    assert (wake["to_slot"], wake["to_created"], wake["to_task"], wake["to_claim"],
            wake["to_pull"]) == (3600.0, 18.0, 18.0, 2.0, 3.0)
    assert wake["wait"] == 3623.0
    assert report["stages"]["wait"] == {"n": 1, "p50": 3623.0, "p99": 3623.0, "max": 3623.0}
    # Ends of turn before ``since`` are not counted.
    assert measure(clock() + timedelta(seconds=1), log)["wakes"] == 0


def _shape(statements: list[str]) -> list[str]:
    """Statements with their bound values (SQLite's trace inlines them) blanked."""
    import re

    return [re.sub(r"'(?:[^']|'')*'|\b\d+(?:\.\d+)?\b|NULL", "?", s) for s in statements]


def _assert_consistent(setup, head: str, written: int) -> None:
    """The floor's goal: its row, its events and their chain agree."""
    from ledger.models import Event, Goal

    goal = Goal.objects.get(pk=setup.goal_id)
    events = list(Event.objects.filter(goal_id=setup.goal_id).order_by("seq")
                  .values_list("seq", "kind", "prev_hash", "hash"))
    assert goal.version == setup.version + written == events[-1][0]
    assert [seq for seq, *_ in events] == list(range(1, len(events) + 1))
    assert goal.last_hash == events[-1][3] == head
    floor_events = events[-written:]
    assert all(kind == "checkpoint.recorded" for _, kind, _, _ in floor_events)
    # The floor's hashes chain on from the store's head, one to the next.
    assert floor_events[0][2] == setup.head
    assert [prev for _, _, prev, _ in floor_events[1:]] == [h for *_, h in floor_events[:-1]]


@pytest.mark.django_db(transaction=True)
def test_the_floor_sends_the_statements_a_checkpoint_sends_and_keeps_its_goal_consistent():
    """bench/floor.py claims to cost what a checkpoint's SQL costs: it must
    send the very statements ``store.execute`` sends (the same count, order
    and text, values aside), and leave a goal row and events that agree."""
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("the statements are compared through SQLite's trace; PostgreSQL's "
                    "floor: test_the_postgresql_floor_...")
    from bench.append import Ours
    from bench.floor import FloorSQLite, prepare

    ours = Ours()
    ours.run(2)
    setup = prepare()
    assert "updated_at" in setup.changed  # a checkpoint moves the projection's clock
    floor = FloorSQLite(connection.settings_dict["NAME"], setup)
    try:
        store_sql: list[str] = []
        connection.connection.set_trace_callback(store_sql.append)
        ours.run(1)
        connection.connection.set_trace_callback(None)
        floor_sql: list[str] = []
        floor.db.set_trace_callback(floor_sql.append)
        floor.run(3)
        floor.db.set_trace_callback(None)
    finally:
        floor.close()
    assert [s.split()[0] for s in store_sql] == ["BEGIN", "SELECT", "INSERT", "UPDATE",
                                                 "COMMIT"]
    assert _shape(floor_sql) == _shape(store_sql) * 3
    _assert_consistent(setup, floor.head, 3)


@pytest.mark.django_db(transaction=True)
def test_the_postgresql_floor_runs_the_stores_prepared_write_and_keeps_its_goal_consistent():
    """On PostgreSQL the floor prepares the store's own append text (it
    refuses to run when the store prepared none for a checkpoint's columns);
    it and the two-trip experiment leave a goal row and events that agree."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's floor; SQLite's: test_the_floor_sends_...")
    from psycopg.conninfo import make_conninfo

    from bench.floor import FloorPostgres, prepare

    params = connection.settings_dict
    conninfo = make_conninfo(**{key: str(params[name]) for key, name in (
        ("host", "HOST"), ("port", "PORT"), ("dbname", "NAME"), ("user", "USER"),
        ("password", "PASSWORD")) if params.get(name)})
    for key, two_trips in (("floor", False), ("floor-two-trips", True)):
        setup = prepare(key)
        floor = FloorPostgres(conninfo, setup, two_trips=two_trips)
        try:
            floor.run(3)
        finally:
            floor.close()
        _assert_consistent(setup, floor.head, 3)
    # Columns no checkpoint changes: the store prepared no such append.
    with pytest.raises(RuntimeError, match="prepared no append"):
        FloorPostgres(conninfo, dataclasses.replace(setup, changed=("no_such_column",)))


def test_the_trace_counts_only_project_code_and_sees_each_layer_of_a_request():
    """bench/trace.py's figure is only as good as its filter: the standard
    library and Django are not counted, and a call into the domain is."""
    import json as json_module

    from bench.trace import traced

    def a_use_case() -> object:
        from ledger.domain.validation import progress

        json_module.dumps({"a": 1})
        return progress(40)

    _, modules, functions = traced(a_use_case)
    assert modules == {"ledger/domain/validation.py"}
    assert ("ledger/domain/validation.py", "progress") in functions


@pytest.mark.django_db(transaction=True)
def test_the_scale_worlds_readers_list_only_its_goals_that_need_a_human():
    """bench/scale.py's world: after its sweeps and claims, /alerts and the
    metrics look at a world in which only the listed goals need a human (none
    stamped ahead of the readers' clock, no unswept lease overdue)."""
    from django.db import connection

    from bench.scale import World

    if connection.vendor != "sqlite":
        pytest.skip("the world is copied with SQLite's SQL")
    world = World(goals=400, due=10, listed=60, rounds=2, claims=3)  # a full page
    world.clients()
    world.op_sweep()
    world.op_alerts()
    world.op_claim()
    for _ in range(2):
        world.op_sweep()
    world.op_alerts()  # asserts the total: the listed goals alone
    world.op_metrics()
