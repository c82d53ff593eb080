"""Property tests of the progress rules (docs/liveness.md) in the pure domain
(hypothesis): the
progress deadline, renewal by every fenced call, the caps, receipts near the
prepared slot and bounded repairs."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.domain import (
    DomainError,
    GoalState,
    Heartbeat,
    LeaseProof,
    RecordCheckpoint,
    RunGoal,
    StartGoal,
    decide,
    decision,
    fold,
    liveness,
)
from ledger.domain.events import iso
from ledger.domain.jobs import TrackJob
from ledger.domain.overdue import MAX_REPAIRS, CheckLiveness, ScheduleRow, check
from ledger.domain.policy import DEFAULT_CAPS, DEFAULT_POLICY, OVER_CAP, policy
from ledger.domain.runs import ReportRun
from ledger.domain.watchdogs import PrepareWatchdog, RecordReceipt

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TOKEN = "a" * 64


def running(**goal_policy) -> GoalState:
    start = StartGoal(goal_id="g", workspace="/w", goal_key="k", objective="o",
                      policy={"lease_seconds": 300, **goal_policy})
    return fold(decide(GoalState(), RunGoal(start, holder="w", token_sha256=TOKEN), T0))


def proof(state: GoalState) -> LeaseProof:
    return LeaseProof(TOKEN, state.lease.generation)


def step(state: GoalState, command, at: datetime) -> GoalState:
    return decision(state, command, at).state


# Fenced calls that keep the lease, as an agent would make them in any order.
calls = st.sampled_from(["heartbeat", "checkpoint", "report_ok", "track_job"])


def fenced(kind: str, state: GoalState, n: int):
    if kind == "heartbeat":
        return Heartbeat(proof(state))
    if kind == "checkpoint":
        return RecordCheckpoint(current_step=f"s{n}", progress_pct=min(100, state.progress_pct),
                                proof=proof(state))
    if kind == "report_ok":
        return ReportRun(proof(state), "ok")
    return TrackJob(proof(state), job_id=f"j{n}", kind="ci", ref=f"run {n}")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(calls, st.integers(1, 299)), min_size=1, max_size=12))
def test_every_fenced_call_renews_the_lease_with_the_same_generation(history):
    state = running()
    generation, at = state.lease.generation, T0
    for n, (kind, wait) in enumerate(history):
        at += timedelta(seconds=wait)  # always within the lease: it must never lapse
        state = step(state, fenced(kind, state, n), at)
        assert state.lease.generation == generation
        assert state.lease.expires_at == at + timedelta(seconds=300)
        assert state.lease.active is True
    # What was decided folds back the same way (replay reads the renewal too).
    assert state.lease == fold([], state).lease


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 290), min_size=1, max_size=40))
def test_heartbeats_never_move_the_progress_deadline(waits):
    state = running()
    deadline = liveness.progress_expectation(state).deadline
    assert deadline == T0 + timedelta(minutes=DEFAULT_POLICY["progress_minutes"])
    at = T0
    for wait in waits:
        at += timedelta(seconds=wait)
        state = step(state, Heartbeat(proof(state)), at)
        expected = liveness.progress_expectation(state)
        if expected is None:  # listed already: nothing more is due
            break
        assert expected.deadline == deadline
        # The goal's deadline column is never later than its progress deadline.
        assert liveness.deadline_at(state) <= deadline
        events = check(state, CheckLiveness(), at)
        said = [e for e in events if e.data.get("reason") == liveness.NO_PROGRESS]
        assert bool(said) == (at >= deadline)
        state = fold(events, state)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 290), st.integers(0, 200))
def test_a_checkpoint_moves_the_progress_deadline_and_clears_no_progress(early, late):
    state = running()
    at = T0 + timedelta(minutes=61)
    state = step(state, Heartbeat(proof(state)), at)
    state = fold(check(state, CheckLiveness(), at), state)
    assert liveness.attention(state) == liveness.NO_PROGRESS
    at += timedelta(seconds=early)
    state = step(state, RecordCheckpoint(current_step="moved", progress_pct=10,
                                         proof=proof(state)), at)
    assert liveness.attention(state) == ""
    assert liveness.progress_expectation(state).deadline == at + timedelta(minutes=60)


names = st.sampled_from(["lease_seconds", "cadence_minutes", "ready_timeout_minutes",
                         "job_deadline_minutes", "progress_minutes"])


@given(names, st.integers(1, 100_000), st.integers(60, 100_000))
def test_a_value_is_refused_over_cap_exactly_when_it_is_over_its_cap(name, value, cap):
    caps = {**DEFAULT_CAPS, name: cap}
    try:
        result = policy({name: value}, caps=caps)
    except DomainError as refused:
        if refused.code == OVER_CAP:
            assert value > cap and refused.extra["cap"] == cap
        else:
            assert refused.code == "validation_error"  # outside what a value may be at all
        return
    assert result[name] == value <= cap


def test_defaults_are_never_over_the_default_caps():
    policy({}, caps=DEFAULT_CAPS)
    policy({"scheduler": "host", "cadence_minutes": DEFAULT_CAPS["cadence_minutes"]},
           caps=DEFAULT_CAPS)


def host_goal() -> tuple[GoalState, datetime]:
    state = running(scheduler="host", cadence_minutes=60)
    state = step(state, PrepareWatchdog(proof(state)), T0)
    return state, state.watchdog.first_due_at


@given(st.integers(-3 * 24 * 60, 3 * 24 * 60))
def test_a_receipt_is_taken_exactly_when_its_due_at_lies_near_the_prepared_slot(minutes):
    state, slot = host_goal()
    due = slot + timedelta(minutes=minutes)
    receipt = RecordReceipt(proof(state), "created", host_ref_sha256="1" * 64, due_at=iso(due))
    near = abs(due - slot) <= timedelta(minutes=90) or \
        T0 - timedelta(minutes=30) <= due <= T0 + timedelta(minutes=90)
    try:
        events = decide(state, receipt, T0)
    except DomainError as refused:
        assert not near and refused.code == "receipt_due_at_mismatch"
        return
    assert near and events[0].data["due_at"] == iso(due)


@pytest.mark.parametrize("extra_checks", [0, 1, 5])
def test_a_wake_repaired_max_repairs_times_is_listed_then_left_alone(extra_checks):
    state = running(cadence_minutes=60)
    state = step(state, RecordCheckpoint(current_step="x", progress_pct=5, release_lease=True,
                                         proof=proof(state)), T0)
    name = state.watchdog.schedule_name
    at = state.watchdog.next_due_at
    late = ScheduleRow(name, exists=True, next_run=iso(at + timedelta(hours=1)),
                       last_error="KeyError")
    repairs = 0
    for _ in range(MAX_REPAIRS + 1 + extra_checks):
        at += timedelta(minutes=6)
        events = check(state, CheckLiveness(rows=(late,)), at)
        repairs += sum(1 for e in events if "repair" in e.data)
        state = fold(events, state)
    assert repairs == MAX_REPAIRS
    assert liveness.attention(state) == liveness.WAKE_NOT_FIRING
    assert state.liveness_alert.last_error == "KeyError"
    assert liveness.deadline_at(state) is None  # nothing more for the sweeper to do
    # An operator's repair runs once more whatever the count, and unlists it.
    events = check(state, CheckLiveness(rows=(late,), by_operator=True), at)
    state = fold(events, state)
    assert [e.data["attempt"] for e in events if "repair" in e.data] == [1]
    assert liveness.attention(state) == ""
