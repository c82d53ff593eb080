"""The event store: one command, one transaction; chain, projection, concurrency."""

import logging
import threading
import time
import uuid
from datetime import UTC, timedelta
from datetime import timezone as datetime_timezone

import pytest
from django.db import DataError, IntegrityError, connections, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.domain import Finish, GoalState, RecordCheckpoint, RunGoal, StartGoal
from ledger.domain.errors import GoalTerminal, ProgressRegressed, SessionBound, WorkspaceBound
from ledger.eventstore import appendsql, store
from ledger.eventstore.chain import GENESIS, event_hash
from ledger.models import Event, Goal
from tests.factories import (
    GoalFactory,
    completed,
    errors_since,
    new_token,
    proof_of,
    server_log,
)


def start_command(**overrides) -> StartGoal:
    values = {"goal_id": str(uuid.uuid4()), "workspace": "/srv/repo", "goal_key": "issue-1",
              "objective": "Fix it", "next_actions": ("look",), "agent": "agent-1"}
    return StartGoal(**{**values, **overrides})


@pytest.mark.django_db
def test_start_creates_goal_with_initial_checkpoint_and_projection(clock):
    outcome = store.start(start_command(workspace="/srv/repo/"), actor="agent-1")
    assert outcome.created
    goal = Goal.objects.get(pk=outcome.state.goal_id)
    assert (goal.status, goal.version, goal.workspace, goal.goal_key, goal.workspace_bound) == \
        ("waiting", 4, "/srv/repo", "issue-1", True)  # + its watchdog (liveness)
    assert goal.created_at == goal.updated_at == clock()
    assert GoalState.from_dict(goal.state) == outcome.state
    first, bound, scheduled, receipt = Event.objects.filter(goal=goal).order_by("seq")
    assert (scheduled.kind, receipt.kind) == ("wake.scheduled", "receipt.recorded")
    assert (first.seq, first.kind, first.actor, first.prev_hash) == \
        (1, "goal.started", "agent-1", GENESIS)
    assert first.data["checkpoint"] == {"current_step": "plan", "progress_pct": 0,
                                        "next_actions": ["look"]}
    assert (bound.kind, bound.prev_hash) == ("workspace.bound", first.hash)
    assert goal.last_hash == receipt.hash


@pytest.mark.django_db
def test_run_goal_takes_the_lease_and_projects_its_expiry(clock):
    outcome = store.start(RunGoal(start_command(), "agent-1", new_token()[1]), actor="agent-1")
    goal = Goal.objects.get(pk=outcome.state.goal_id)
    assert goal.status == "running"
    assert goal.lease_expires_at == clock() + timedelta(seconds=600)
    assert [e.kind for e in outcome.events] == ["goal.started", "workspace.bound",
                                                "lease.acquired"]


@pytest.mark.django_db
def test_a_bound_workspace_refuses_another_goal_key(clock):
    store.start(start_command(), actor="agent-1")
    with pytest.raises(WorkspaceBound):
        store.start(start_command(goal_key="issue-2", workspace="/srv/repo/."), actor="agent-1")
    assert Goal.objects.count() == 1


@pytest.mark.django_db
def test_starting_the_same_key_again_returns_the_active_goal(clock):
    first = store.start(start_command(), actor="agent-1")
    again = store.start(start_command(objective="Other words"), actor="agent-1")
    assert not again.created and again.events == []
    assert again.state.goal_id == first.state.goal_id
    assert Goal.objects.count() == 1 and Event.objects.count() == 4


@pytest.mark.django_db
def test_a_finished_goal_key_can_start_anew(clock):
    first = store.start(RunGoal(start_command(), "agent-1", new_token()[1]), actor="agent-1")
    store.execute(first.state.goal_id, completed(first.state), actor="agent-1")
    second = store.start(start_command(), actor="agent-1")
    assert second.created and second.state.goal_id != first.state.goal_id
    assert Goal.objects.filter(goal_key="issue-1").count() == 2


@pytest.mark.django_db
def test_commands_append_chained_events_and_fold_them(clock):
    goal = GoalFactory()
    clock.advance(minutes=3)
    outcome = store.execute(goal.pk, RecordCheckpoint(
        current_step="tests", progress_pct=30, proof=proof_of(GoalState.from_dict(goal.state))),
        actor="agent-1", idempotency_key="key-1")
    [stored] = outcome.events
    row = Event.objects.get(goal=goal, seq=4)
    assert row.prev_hash == goal.last_hash
    assert row.hash == event_hash(row.prev_hash, str(goal.pk), 4, row.kind, row.data,
                                  row.actor, row.recorded_at) == stored.hash
    assert row.idempotency_key == "key-1"
    goal.refresh_from_db()
    assert goal.version == 4 and goal.last_hash == row.hash
    assert goal.updated_at == clock()
    assert goal.state["current_step"] == "tests" and goal.state["progress_pct"] == 30


@pytest.mark.django_db
def test_a_refused_command_records_nothing(clock):
    goal = GoalFactory(checkpoints=5)
    proof = proof_of(GoalState.from_dict(goal.state))
    before = (Goal.objects.values().get(pk=goal.pk), Event.objects.filter(goal=goal).count())
    with pytest.raises(ProgressRegressed):
        store.execute(goal.pk, RecordCheckpoint(current_step="x", progress_pct=1, proof=proof),
                      actor="agent-1")
    assert (Goal.objects.values().get(pk=goal.pk),
            Event.objects.filter(goal=goal).count()) == before
    store.execute(goal.pk, Finish("failed", proof=proof), actor="agent-1")
    failed = (Goal.objects.values().get(pk=goal.pk), Event.objects.filter(goal=goal).count())
    with pytest.raises(GoalTerminal):
        store.execute(goal.pk, RecordCheckpoint(current_step="x", progress_pct=90, proof=proof),
                      actor="agent-1")
    assert (Goal.objects.values().get(pk=goal.pk),
            Event.objects.filter(goal=goal).count()) == failed
    assert failed[1] == before[1] + 1


@pytest.mark.django_db
@pytest.mark.parametrize("goal_id", ["not-a-uuid", str(uuid.uuid4())])
def test_unknown_goal_is_not_found(goal_id):
    with pytest.raises(store.GoalNotFound):
        store.execute(goal_id, Finish("completed"), actor="a")


@pytest.mark.django_db
def test_the_database_refuses_a_second_event_with_the_same_seq():
    goal = GoalFactory()
    first = Event.objects.get(goal=goal, seq=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        Event.objects.create(goal=goal, seq=1, kind="checkpoint.recorded", data={},
                             actor="x", recorded_at=first.recorded_at, prev_hash=GENESIS,
                             hash="f" * 64)


def _row(goal: Goal, **values) -> Goal:
    """A bare projection row beside ``goal`` (the constraints, without the store)."""
    fields = {"workspace": goal.workspace, "goal_key": goal.goal_key, "agent": goal.agent,
              "status": "waiting", "created_at": goal.created_at,
              "updated_at": goal.updated_at, "version": 0, "last_hash": GENESIS, "state": {},
              **values}
    return Goal.objects.create(**fields)


@pytest.mark.django_db
@pytest.mark.parametrize("values", [
    {},  # one goal per workspace: the same (agent, workspace, goal_key)
    {"goal_key": "other", "workspace_bound": True},  # the agent's workspace binding
    {"goal_key": "other", "workspace": "/elsewhere", "session_key": "s-1"},  # its session key
], ids=["key", "binding", "session"])
def test_the_database_refuses_a_second_active_goal_of_one_agent(values):
    goal = GoalFactory(session={"session_key": "s-1"})
    with pytest.raises(IntegrityError), transaction.atomic():
        _row(goal, **values)


@pytest.mark.django_db
def test_the_database_scopes_every_binding_to_the_goals_agent():
    """Another agent's goal may share the workspace, the goal key, the binding
    and the session key: each agent's are its own (docs/security.md)."""
    goal = GoalFactory(session={"session_key": "s-1"})
    _row(goal, agent="agent-2", workspace_bound=True, session_key="s-1")
    assert Goal.objects.filter(workspace=goal.workspace, goal_key=goal.goal_key,
                               session_key="s-1", workspace_bound=True).count() == 2


@pytest.mark.django_db
def test_another_agents_start_on_a_bound_workspace_gets_its_own_goal(clock):
    mine = store.start(start_command(session={"session_key": "s-1"}), actor="agent-1")
    theirs = store.start(start_command(agent="agent-2", session={"session_key": "s-1"}),
                         actor="agent-2")
    assert theirs.created and theirs.state.goal_id != mine.state.goal_id
    assert (theirs.state.agent, theirs.state.workspace_bound) == ("agent-2", True)
    # Within each agent the rules hold as before.
    for agent in ("agent-1", "agent-2"):
        with pytest.raises(WorkspaceBound):
            store.start(start_command(agent=agent, goal_key="issue-2"), actor=agent)
    assert store.start(start_command(agent="agent-2"), actor="agent-2").state.goal_id == \
        theirs.state.goal_id


@pytest.mark.django_db(transaction=True)
def test_concurrent_commands_serialize_on_the_goal_row():
    """Writers in several threads (own connections) append to one goal: every
    seq is used once, the chain is intact, the projection counts them all,
    and the waits on the row lock reach PostgreSQL's log as no error."""
    goal = GoalFactory()
    proof = proof_of(GoalState.from_dict(goal.state))
    writers, per_writer = 6, 10
    log = server_log()
    offset = log.stat().st_size if log else 0
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(per_writer):
                store.execute(goal.pk, RecordCheckpoint(current_step=f"w{n}-{i}", progress_pct=0,
                                                        proof=proof), actor=f"writer-{n}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    goal.refresh_from_db()
    assert goal.version == 3 + writers * per_writer
    seqs = list(Event.objects.filter(goal=goal).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, goal.version + 1))
    from ledger.eventstore import projection

    assert [r.broken for r in projection.verify([str(goal.pk)])] == [None]
    assert errors_since(log, offset) == []


@pytest.mark.django_db(transaction=True)
def test_concurrent_starts_of_one_key_make_one_goal():
    results: list[store.Outcome] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def work() -> None:
        try:
            barrier.wait()
            results.append(store.start(start_command(goal_key="race"), actor="agent-1"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len({r.state.goal_id for r in results}) == 1
    assert sum(r.created for r in results) == 1
    assert Goal.objects.filter(goal_key="race").count() == 1


@pytest.mark.django_db(transaction=True)
def test_expected_start_races_end_in_no_error_on_either_side(caplog):
    """Concurrent starts that collide on every constraint of Goal: one goal per
    key, one binding per workspace, one goal per session key. The outcome is as
    if they ran one after the other, and nothing is logged as an error: not by
    PostgreSQL (no unique violation on the expected path: store.start waits on
    an advisory lock before it reads) and not by us at WARNING or above."""
    log = server_log()
    offset = log.stat().st_size if log else 0
    racers = [("agent-1", {"goal_key": "race"})] * 4 + [
        # Same agent and workspace, other keys: one binds it, the rest are refused.
        ("agent-1", {"goal_key": f"other-{n}"}) for n in range(3)] + [
        # Same agent and session key, other workspaces: one goal gets the key.
        ("agent-1", {"workspace": f"/srv/s/{n}", "session": {"session_key": "s-1"}})
        for n in range(4)] + [
        # Another agent on the same workspace and key, at the same moment: its own goal.
        ("agent-2", {"goal_key": "race"})] * 3
    results: list[tuple[str, store.Outcome | BaseException]] = []
    barrier = threading.Barrier(len(racers))

    def work(agent: str, overrides: dict) -> None:
        try:
            barrier.wait()
            results.append((agent, store.start(start_command(agent=agent, **overrides),
                                               actor=agent)))
        except (WorkspaceBound, SessionBound) as refused:
            results.append((agent, refused))
        except BaseException as exc:  # pragma: no cover - reported below
            results.append((agent, exc))
        finally:
            connections.close_all()

    with caplog.at_level(logging.INFO):
        threads = [threading.Thread(target=work, args=racer) for racer in racers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    unexpected = [r for _, r in results if isinstance(r, BaseException)
                  and not isinstance(r, WorkspaceBound | SessionBound)]
    assert unexpected == []
    active = Goal.objects.exclude(status__in=["done", "failed", "stopped"])
    # agent-1: the "race" goal plus one session goal; a start of another key in
    # the bound workspace is refused (the "race" goal may itself lose to one).
    mine = active.filter(agent="agent-1")
    assert mine.filter(workspace="/srv/repo").count() == 1
    assert mine.filter(session_key="s-1").count() == 1
    assert active.filter(agent="agent-2").count() == 1
    outcomes = [r for _, r in results if isinstance(r, store.Outcome)]
    assert sum(o.created for o in outcomes) == active.count() == 3
    assert len({o.state.goal_id for o in outcomes}) == 3
    assert [r.levelname for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert errors_since(log, offset) == []

    if log is not None:
        # The control: the reader does see an ERROR the server logs.
        goal = Goal.objects.filter(agent="agent-2").get()
        with pytest.raises(IntegrityError), transaction.atomic():
            _row(goal)
        deadline = time.monotonic() + 5
        while not errors_since(log, offset) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any("duplicate key value" in line for line in errors_since(log, offset))


# One agent's start: (agent, workspace, goal_key, session key or "").
_starts = st.lists(st.tuples(st.sampled_from(["agent-1", "agent-2"]),
                             st.sampled_from(["/srv/app", "/srv/app/", "/srv/web"]),
                             st.sampled_from(["k1", "k2"]),
                             st.sampled_from(["", "s-1", "s-2"])),
                   min_size=1, max_size=12)


def _answers(starts: list[tuple[str, str, str, str]]) -> dict[str, list[object]]:
    """Each agent's answers to its starts, in order, inside a transaction that
    is rolled back: the goal each start got (numbered per agent in order of
    creation), whether it was created, or the refusal's code."""
    answers: dict[str, list[object]] = {}
    numbers: dict[str, int] = {}
    with transaction.atomic():
        for agent, workspace, key, session in starts:
            try:
                outcome = store.start(start_command(
                    agent=agent, workspace=workspace, goal_key=key,
                    session={"session_key": session} if session else {}), actor=agent)
            except (WorkspaceBound, SessionBound) as refused:
                answers.setdefault(agent, []).append(refused.code)
                continue
            number = numbers.setdefault(outcome.state.goal_id, len(numbers))
            answers.setdefault(agent, []).append((number, outcome.created))
        transaction.set_rollback(True)
    return answers


@pytest.mark.django_db
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_starts)
def test_no_agent_can_change_what_another_agents_starts_answer(clock, starts):
    """Non-interference: whatever agent-2 starts, and when, agent-1's starts
    get exactly the answers they get when agent-2 never started anything (the
    same goals, created or returned, the same refusals), and the other way
    round. Squatting a workspace, a goal key or a session key is impossible."""
    together = _answers(starts)
    for agent in ("agent-1", "agent-2"):
        alone = _answers([s for s in starts if s[0] == agent])
        ours = together.get(agent, [])
        # Goal numbers differ when the other agent's goals came first; compare
        # them renumbered in order of first appearance.
        assert _renumbered(ours) == _renumbered(alone.get(agent, []))


def _renumbered(answers: list[object]) -> list[object]:
    seen: dict[int, int] = {}
    return [(seen.setdefault(a[0], len(seen)), a[1]) if isinstance(a, tuple) else a
            for a in answers]


# --------------------------------------------------------------- the decoded-state cache


def _checkpoint(state: GoalState, pct: int) -> RecordCheckpoint:
    return RecordCheckpoint(current_step=f"step {pct}", progress_pct=pct, proof=proof_of(state))


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_command_leaves_no_state_behind_for_the_next_one(clock):
    """The store keeps the states it wrote by their stored text; a command whose
    transaction rolled back (an outer atomic, an effect that raised) must not
    be the state the next command is decided on."""
    state = store.start(RunGoal(start_command(), "agent-1", new_token()[1]),
                        actor="agent-1").state
    state = store.execute(state.goal_id, _checkpoint(state, 10), actor="agent-1").state
    with pytest.raises(RuntimeError), transaction.atomic():
        store.execute(state.goal_id, _checkpoint(state, 50), actor="agent-1")
        raise RuntimeError("the caller's transaction fails after the command")
    after = store.execute(state.goal_id, _checkpoint(state, 20), actor="agent-1").state
    assert (after.version, after.progress_pct, after.checkpoints) == \
        (state.version + 1, 20, state.checkpoints + 1)
    assert GoalState.from_dict(Goal.objects.get(pk=state.goal_id).state) == after


@pytest.mark.django_db(transaction=True)
def test_a_projection_rewritten_by_someone_else_is_read_again(clock):
    """Another process's write (or replay --fix) changes the stored text: the
    next command sees the database's state, not the one this process holds."""
    state = store.start(RunGoal(start_command(), "agent-1", new_token()[1]),
                        actor="agent-1").state
    state = store.execute(state.goal_id, _checkpoint(state, 10), actor="agent-1").state
    rewritten = state.but(objective="Fix it, as the operator's fix says")
    Goal.objects.filter(pk=state.goal_id).update(state=rewritten.to_dict())
    after = store.execute(state.goal_id, _checkpoint(state, 20), actor="agent-1").state
    assert after.objective == "Fix it, as the operator's fix says"


@pytest.mark.django_db(transaction=True)
def test_the_next_command_finds_the_state_the_last_one_wrote_without_decoding_it(
        clock, monkeypatch):
    """The text kept with a written state is the text the database hands back
    (on PostgreSQL jsonb's own spelling, which the write returns), so the next
    command on the goal in this process decodes nothing."""
    state = store.start(RunGoal(start_command(), "agent-1", new_token()[1]),
                        actor="agent-1").state
    state = store.execute(state.goal_id, _checkpoint(state, 10), actor="agent-1").state
    with connections["default"].cursor() as cursor:
        cursor.execute(f"SELECT state FROM {Goal._meta.db_table} WHERE id = %s",
                       [Goal._meta.pk.get_db_prep_value(uuid.UUID(state.goal_id),
                                                         connections["default"])])
        stored_text = cursor.fetchone()[0]
    assert store._states[state.goal_id][0] == stored_text
    decoded = []
    real = GoalState.from_dict
    monkeypatch.setattr(GoalState, "from_dict",
                        classmethod(lambda cls, data: decoded.append(data) or real(data)))
    after = store.execute(state.goal_id, _checkpoint(state, 20), actor="agent-1").state
    assert decoded == []
    assert after.progress_pct == 20 and after.version == state.version + 1


@pytest.mark.django_db(transaction=True)
def test_a_command_on_postgresql_takes_three_round_trips_and_still_rolls_back(clock, tmp_path):
    """PostgreSQL: BEGIN travels with the locked read (appendsql.begin_and_lock),
    so a checkpoint is three round trips (BEGIN + lock-and-read, the write,
    COMMIT), and a refused command or an unknown goal still leaves nothing
    behind and the connection ready for the next one."""
    connection = connections["default"]
    if connection.vendor != "postgresql":
        pytest.skip("round trips to a server: PostgreSQL only")
    import os

    from psycopg import pq

    state = store.start(RunGoal(start_command(), "agent-1", new_token()[1]),
                        actor="agent-1").state
    state = store.execute(state.goal_id, _checkpoint(state, 10), actor="agent-1").state
    pgconn = connection.connection.pgconn
    trace = tmp_path / "libpq.trace"
    fd = os.open(trace, os.O_WRONLY | os.O_CREAT)
    pgconn.trace(fd)
    pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
    try:
        after = store.execute(state.goal_id, _checkpoint(state, 20), actor="agent-1").state
    finally:
        pgconn.untrace()
        os.close(fd)
    sent = [line.split("\t")[2].split(" ")[0] for line in trace.read_text().splitlines()
            if line.startswith("F\t")]
    assert sent.count("Query") + sent.count("Sync") == 3, sent
    assert after.version == state.version + 1
    with pytest.raises(ProgressRegressed):
        store.execute(state.goal_id, _checkpoint(after, 5), actor="agent-1")
    with pytest.raises(store.GoalNotFound):
        store.execute(uuid.uuid4(), _checkpoint(after, 30), actor="agent-1")
    assert pgconn.transaction_status == pq.TransactionStatus.IDLE
    last = store.execute(state.goal_id, _checkpoint(after, 30), actor="agent-1").state
    assert last.version == after.version + 1
    assert Event.objects.filter(goal_id=state.goal_id).count() == last.version


_ZONES = st.sampled_from([UTC, datetime_timezone(timedelta(hours=3)),
                          datetime_timezone(timedelta(hours=-5, minutes=-30))])


@settings(max_examples=200, deadline=None)
@given(instant=st.datetimes(timezones=_ZONES))
def test_the_append_path_writes_instants_as_djangos_orm_does(instant):
    """The append path adapts its datetimes itself (appendsql._datetime_value);
    the text must be the ORM's, or a filter on deadline_at or updated_at would
    compare against another spelling."""
    connection = connections["default"]
    assert appendsql.adapt(connection, instant) == \
        connection.ops.adapt_datetimefield_value(instant)


@settings(max_examples=200, deadline=None)
@given(instant=st.datetimes(timezones=_ZONES))
def test_the_libpq_append_writes_instants_as_isoformat_does(instant):
    """PostgreSQL's direct append sends each instant as the text it parses:
    isoformat's, %-formatted for UTC (appendsql._as_text)."""
    assert appendsql._as_text(instant) == instant.isoformat().encode()


@pytest.mark.django_db(transaction=True)
def test_postgresql_refuses_a_nul_in_a_text_parameter_of_the_append(clock):
    """libpq's text parameters end at a NUL: the direct append path refuses
    one, as psycopg's adapter does, rather than store a cut string; nothing is
    recorded and the goal takes the next command."""
    connection = connections["default"]
    if connection.vendor != "postgresql":
        pytest.skip("libpq parameters: PostgreSQL only")
    state = store.start(RunGoal(start_command(), "agent-1", new_token()[1]),
                        actor="agent-1").state
    events_before = Event.objects.count()
    with pytest.raises(DataError):
        store.execute(state.goal_id, _checkpoint(state, 10), actor="agent\x00-1")
    assert Event.objects.count() == events_before
    after = store.execute(state.goal_id, _checkpoint(state, 10), actor="agent-1").state
    assert after.version == state.version + 1


@pytest.mark.django_db(transaction=True)
def test_postgresql_appends_leave_no_prepared_statement_on_the_server(clock):
    """A transaction-pooling PgBouncer hands each transaction whichever server
    connection is free: a named statement prepared in one transaction would
    be missing in the next. The append path keeps none (docs/deploy.md)."""
    connection = connections["default"]
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements: PostgreSQL only")
    state = store.start(RunGoal(start_command(), "agent-1", new_token()[1]),
                        actor="agent-1").state
    for pct in (10, 20, 30):
        state = store.execute(state.goal_id, _checkpoint(state, pct), actor="agent-1").state
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements")
        assert cursor.fetchall() == []
    stored = Goal.objects.get(pk=state.goal_id)
    assert (stored.version, stored.state["progress_pct"]) == (state.version, 30)


def test_the_append_paths_stored_event_is_the_dataclasss_own():
    """StoredEvent.appended (the append path's constructor) makes the object
    the frozen dataclass's __init__ makes: the same fields, equal, frozen."""
    from dataclasses import FrozenInstanceError, fields

    values = {f.name: f"v-{f.name}" for f in fields(store.StoredEvent)}
    made, appended = store.StoredEvent(**values), store.StoredEvent.appended(**values)
    assert appended == made and appended.__dict__ == made.__dict__
    with pytest.raises(FrozenInstanceError):
        appended.seq = 2
