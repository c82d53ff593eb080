"""The goals-by-status tallies (ledger/eventstore/tallies.py): every path
that writes a goal row keeps them equal to a GROUP BY of the goal table, the
hot path pays no statement for them, and ``ledger doctor`` finds and fixes a
drift."""

import threading
import uuid
import zlib
from collections import Counter

import pytest
from django.db import connection, connections, transaction
from django.db.models import Count
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ledger.domain import (
    AcquireLease,
    DomainError,
    Finish,
    GoalState,
    Heartbeat,
    RecordCheckpoint,
    ReleaseLease,
    RunGoal,
)
from ledger.domain.runs import Recover, Stop
from ledger.domain.vocabulary import TERMINAL_STATUSES
from ledger.eventstore import appendsql, projection, store, tallies
from ledger.models import Goal, Tally
from ledger.operators import doctor, metrics
from ledger.services import alerts
from scheduling import tasks
from tests.factories import GoalFactory, evidence_for, new_token, proof_of
from tests.helpers import ledger

GOALS = 2  # workspaces the commands of one example touch (each started first)


def grouped() -> Counter[tuple[str, str, str]]:
    """What the tallies must equal: the goal table grouped by (status,
    reason), counted by the ORM (not by the SQL the doctor's check runs)."""
    found: Counter[tuple[str, str, str]] = Counter()
    for row in Goal.objects.order_by().values("status", "reason").annotate(n=Count("id")):
        name = tallies.ENDED if row["status"] in TERMINAL_STATUSES else tallies.ACTIVE
        found[name, row["status"], row["reason"]] = row["n"]
    return found


def tallied() -> Counter[tuple[str, str, str]]:
    """The goal tallies' rows summed over their shards."""
    found: Counter[tuple[str, str, str]] = Counter()
    for name in tallies.GOAL_TALLIES:
        for text, value in tallies.read().get(name, {}).items():
            labels = tallies.parse_labels(text)
            found[name, labels["status"], labels["reason"]] += int(value)
    return +found  # the zeros dropped, as a GROUP BY has none


def scraped() -> Counter[tuple[str, str]]:
    body = generate_latest(metrics.registry()).decode()
    return Counter({(s.labels["status"], s.labels["reason"]): int(s.value)
                    for family in text_string_to_metric_families(body)
                    if family.name == "wakeledger_goals" for s in family.samples})


def assert_in_step() -> None:
    assert tallied() == grouped()
    assert tallies.drift() == {}
    assert scraped() == Counter({(status, reason): n for (_, status, reason), n
                                 in grouped().items()})


# ---------------------------------------------------------------- commands


class World:
    """A few workspaces, each with its current goal and that goal's holder's
    token; a step runs one command and lets the domain refuse it."""

    def __init__(self) -> None:
        self.current: dict[int, str] = {}
        self.tokens: dict[int, str] = {}

    def state(self, i: int) -> GoalState | None:
        return store.load(self.current[i]) if i in self.current else None

    def step(self, action: str, i: int, clock) -> None:
        state = self.state(i)
        try:
            if action == "start":
                self.tokens[i] = new_token()[1]
                command = RunGoal(GoalFactory.build(workspace=f"/srv/w{i}", goal_key=f"k{i}",
                                              agent="agent-1"), "agent-1", self.tokens[i])
                self.current[i] = store.start(command, actor="agent-1").state.goal_id
            elif state is None:
                return
            elif action == "acquire":
                self.tokens[i] = new_token()[1]
                store.execute(state.goal_id, AcquireLease("agent-1", self.tokens[i]),
                              actor="agent-1")
            elif action == "expire":
                # Past every lease and deadline: the sweeper (its own writer
                # path) expires the leases or blocks the goals, and the next
                # acquire takes a lease over.
                clock.advance(hours=2)
                tasks.sweep_leases()
            else:
                store.execute(state.goal_id, self.command(action, state), actor="agent-1")
        except DomainError:
            pass  # refused: nothing was written, so nothing may move

    @staticmethod
    def command(action: str, state: GoalState):
        proof = proof_of(state) if state.lease else None
        return {
            "heartbeat": lambda: Heartbeat(proof),
            "checkpoint": lambda: RecordCheckpoint("step", state.progress_pct, proof=proof),
            "release": lambda: ReleaseLease(proof),
            "complete": lambda: Finish("completed", "done", proof, evidence_for(state)),
            "fail": lambda: Finish("failed", "broke", proof),
            "block": lambda: Finish("blocked", "needs a human", proof),
            "stop": lambda: Stop("ops", "wrong repository"),
            "recover": lambda: Recover("ops", "try again"),
        }[action]()


ACTIONS = ("start", "acquire", "expire", "heartbeat", "checkpoint", "release", "complete",
           "fail", "block", "stop", "recover")
_steps = st.lists(st.tuples(st.sampled_from(ACTIONS), st.integers(0, GOALS - 1)),
                  min_size=1, max_size=30)


@pytest.mark.django_db
@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_steps)
def test_the_goal_tallies_equal_a_count_of_the_goal_table_after_any_commands(clock, steps):
    """Whatever commands run over a few goals (started, started again after
    they ended, leases taken, released, expired by the sweeper, taken over,
    finished every way, stopped, recovered, refused), the tallies /metrics
    reads are the GROUP BY of the goal table after every command, and the
    scrape reports exactly that."""
    with transaction.atomic():
        world = World()
        for i in range(GOALS):
            world.step("start", i, clock)
        for action, i in steps:
            world.step(action, i, clock)
            assert tallied() == grouped(), (action, i)
        assert_in_step()
        transaction.set_rollback(True)


# ---------------------------------------------------------------- the hot path


@pytest.mark.django_db
def test_a_heartbeat_or_a_checkpoint_writes_no_tally_a_change_of_status_one_statement(
        clock, monkeypatch):
    # Counted through Django's cursor (the recorders' reference): the fast
    # recorders send the same statements past it (tests/eventstore/test_recorders.py).
    monkeypatch.setattr(appendsql, "recorder_for", lambda conn: appendsql.DjangoRecorder())
    outcome = store.start(RunGoal(GoalFactory.build(), "agent-1", new_token()[1]), actor="agent-1")
    state = outcome.state
    with CaptureQueriesContext(connection) as hot:
        state = store.execute(state.goal_id, Heartbeat(proof_of(state)), actor="agent-1").state
        state = store.execute(state.goal_id, RecordCheckpoint("step", 10, proof=proof_of(state)),
                              actor="agent-1").state
    assert state.version == outcome.state.version + 2
    assert not [q for q in hot.captured_queries if "ledger_tally" in q["sql"]]
    with CaptureQueriesContext(connection) as moved:
        store.execute(state.goal_id, ReleaseLease(proof_of(state)), actor="agent-1")
    assert len([q for q in moved.captured_queries if "ledger_tally" in q["sql"]]) == 1
    assert tallied() == grouped() == Counter({(tallies.ACTIVE, "waiting", ""): 1})


@pytest.mark.django_db(transaction=True)
def test_a_tally_added_before_any_other_statement_rolls_back_with_its_transaction():
    """The fast recorders send the upsert past Django's cursor; on
    PostgreSQL that is past psycopg's implicit BEGIN too, so a transaction
    whose first statement it is must still hold it."""
    connection.ensure_connection()
    with pytest.raises(RuntimeError), transaction.atomic():
        tallies.add({(tallies.CLAIMS, tallies.labels(outcome="granted", source="internal")): 1})
        raise RuntimeError("rolled back")
    assert not Tally.objects.filter(name=tallies.CLAIMS).exists()


# ---------------------------------------------------------------- other writers


@pytest.mark.django_db
def test_replay_fix_moves_the_tallies_with_the_status_it_rewrites(clock):
    """A projection whose status differs from its events, written through
    the store (its tallies moved with it: a fold that changed, say): the fix
    of that one goal rewrites the status and moves the tallies with it, in
    its own transaction."""
    gid = store.start(RunGoal(GoalFactory.build(), "agent-1", new_token()[1]),
                      actor="agent-1").state.goal_id
    Goal.objects.filter(pk=gid).update(status="blocked", reason="BLOCKED_ON_HUMAN")
    tallies.recount()  # as if the store had written that projection
    assert grouped() == Counter({(tallies.ACTIVE, "blocked", "BLOCKED_ON_HUMAN"): 1})
    report = projection._confirm(gid, fix=True)
    assert report is not None and report.fixed
    assert Goal.objects.get(pk=gid).status == "running"
    assert_in_step()


@pytest.mark.django_db
def test_replay_fix_of_a_row_edited_by_hand_ends_with_the_tallies_recounted(clock):
    """A status edited by hand never moved the tallies, so moving them back
    would count the goal twice: ``replay --fix`` recounts once it rewrote a
    status, and the tallies are the count again."""
    gids = [store.start(RunGoal(GoalFactory.build(), "agent-1", new_token()[1]),
                        actor="agent-1").state.goal_id for _ in range(2)]
    Goal.objects.filter(pk=gids[0]).update(status="done")
    reports = list(projection.replay(projection.goal_ids(), fix=True))
    assert [(r.goal_id, r.fixed) for r in reports] == [(gids[0], True)]
    assert_in_step()
    assert grouped() == Counter({(tallies.ACTIVE, "running", ""): 2})


@pytest.mark.django_db
def test_the_doctor_reports_a_drift_and_its_fix_recounts(clock):
    """A goal row written past the store (by hand, a restored backup, an old
    process during an upgrade): ``ledger doctor`` names the disagreement and
    ``--fix`` sets the tallies to the count; then the doctor is quiet about it."""
    first = store.start(RunGoal(GoalFactory.build(), "agent-1", new_token()[1]),
                        actor="agent-1").state.goal_id
    store.start(RunGoal(GoalFactory.build(), "agent-1", new_token()[1]), actor="agent-1")
    assert_in_step()
    Goal.objects.filter(pk=first).update(status="done")
    found = [f for f in doctor.findings() if f.problem == "tallies_drift"]
    assert len(found) == 1 and found[0].goal_id == ""
    assert "running/- tallied 2, counted 1" in found[0].detail
    assert "done/- tallied 0, counted 1" in found[0].detail
    assert scraped()["running", ""] == 2  # the scrape reads the tallies, not the table
    done = doctor.fix()
    assert [line for line in done if line.startswith("recounted the goal tallies: ")]
    assert not [f for f in doctor.findings() if f.problem == "tallies_drift"]
    assert_in_step()


@pytest.mark.django_db
def test_ledger_doctor_prints_the_drift_and_fix_recounts(clock):
    """The operator's view of the same: `ledger doctor` names the drift and
    exits 1; `ledger doctor --fix` says what it recounted and exits 0."""
    gid = store.start(RunGoal(GoalFactory.build(), "agent-1", new_token()[1]),
                      actor="agent-1").state.goal_id
    alerts.beat()  # a scheduler that runs: the drift is the only problem
    assert ledger("doctor")[0] == 0
    Goal.objects.filter(pk=gid).update(status="paused")
    code, out, _ = ledger("doctor")
    assert code == 1
    assert ("scheduler: tallies_drift: the goals /metrics reports disagree with a count of "
            "the goal table: paused/- tallied 0, counted 1; running/- tallied 1, counted 0 "
            "(`ledger doctor --fix` recounts them)") in out.splitlines()
    code, out, _ = ledger("doctor", "--fix")
    assert code == 0, out
    assert ("fixed: recounted the goal tallies: paused/- tallied 0, counted 1; running/- "
            "tallied 1, counted 0") in out.splitlines()
    assert_in_step()


# ---------------------------------------------------------------- concurrency


@pytest.mark.django_db(transaction=True)
def test_two_threads_moving_goals_and_a_recount_leave_the_tallies_exact(clock):
    """PostgreSQL, where commands really overlap: two writers each move their
    own goal between running and waiting (the same two tally rows, locked in
    one order: no deadlock) while a third recounts under its table lock;
    at the end the tallies are the count, and nobody raised."""
    if connection.vendor != "postgresql":
        pytest.skip("overlapping transactions: PostgreSQL only (SQLite has one writer)")
    gids = [store.start(RunGoal(GoalFactory.build(), "agent-1", new_token()[1]),
                        actor="agent-1").state.goal_id for _ in range(2)]
    errors: list[BaseException] = []
    rounds = 15

    def move(gid: str) -> None:
        try:
            for _ in range(rounds):
                state = store.load(gid)
                store.execute(gid, ReleaseLease(proof_of(state)), actor="agent-1")
                store.execute(gid, AcquireLease("agent-1", new_token()[1]), actor="agent-1")
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            connections.close_all()

    def recount() -> None:
        try:
            for _ in range(rounds):
                tallies.recount()
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=move, args=(gid,)) for gid in gids]
    threads.append(threading.Thread(target=recount))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    assert all(store.load(gid).status == "running" for gid in gids)
    assert_in_step()


def test_a_goal_before_its_start_is_in_no_tally_and_each_goal_has_one_shard():
    gid = "0b9c6a7e-5d43-4f0e-9b1a-2f3c4d5e6f70"
    assert tallies.goal_key("", "") is None
    assert tallies.moved(gid, ("", ""), ("running", "")) == {
        (tallies.ACTIVE, tallies.labels(reason="", shard=tallies.shard_of(gid),
                                        status="running")): 1}
    assert tallies.moved(gid, ("done", ""), ("done", "")) == {}
    # Stable across processes (zlib.crc32, not the salted hash()), and spread.
    assert tallies.shard_of(gid) == str(zlib.crc32(gid.encode()) % tallies.SHARDS)
    assert len({tallies.shard_of(str(uuid.UUID(int=i))) for i in range(200)}) == tallies.SHARDS


@pytest.mark.django_db
def test_a_goal_tally_is_the_sum_of_its_shards_even_below_zero_after_a_recount(clock):
    """After a recount the count sits in the shard-less row; goals leaving
    then take their shard's row below zero: the scrape and the doctor read
    the sum, which is the count."""
    gids = [store.start(RunGoal(GoalFactory.build(), "agent-1", new_token()[1]),
                        actor="agent-1").state.goal_id for _ in range(3)]
    Tally.objects.filter(name=tallies.ACTIVE).update(value=7)  # drifted
    assert tallies.recount()
    running = tallies.labels(reason="", status="running")
    assert Tally.objects.get(name=tallies.ACTIVE, labels=running).value == 3
    for gid in gids[:2]:
        state = store.load(gid)
        store.execute(gid, ReleaseLease(proof_of(state)), actor="agent-1")
    rows = tallies.read()[tallies.ACTIVE]
    assert min(rows.values()) < 0
    assert tallies.goal_sums(rows) == {running: 1, tallies.labels(reason="",
                                                                   status="waiting"): 2}
    assert_in_step()
