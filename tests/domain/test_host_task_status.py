"""A goal as a host's task (ledger.domain.hosttasks): the status, the words
and the poll interval read from any goal state."""

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from ledger.domain import GoalState
from ledger.domain.hosttasks import (
    CANCEL_REASON,
    MAX_POLL_SECONDS,
    MIN_POLL_SECONDS,
    TASK_STATUSES,
    task_view,
)
from ledger.domain.parts import OneOffWake, Ready, Watchdog
from ledger.domain.state import REASONS, STATUSES

NOW = datetime(2026, 12, 8, 12, 0, tzinfo=UTC)
PROVIDER_TEXT = "Error 529 overloaded_error: upstream said hello-PROVIDER"

offsets = st.integers(min_value=-86_400, max_value=7 * 86_400).map(
    lambda s: NOW + timedelta(seconds=s))
gates = st.lists(st.text(min_size=1, max_size=100), max_size=3)


@st.composite
def states(draw) -> GoalState:
    status = draw(st.sampled_from(STATUSES))
    watchdog = draw(st.none() | st.builds(
        Watchdog, backend=st.just("internal"), interval_seconds=st.just(900),
        tzid=st.just("UTC"), status=st.sampled_from(["live", "requested", "failed"]),
        next_due_at=st.none() | offsets))
    return GoalState(
        goal_id="0f0e0d0c-0b0a-4908-8706-050403020100", status=status,
        reason=draw(st.sampled_from(("", *REASONS))),
        progress_pct=draw(st.integers(0, 100)), checkpoints=draw(st.integers(0, 50)),
        errors=[PROVIDER_TEXT], summary=PROVIDER_TEXT, current_step=PROVIDER_TEXT,
        paused_until=draw(st.none() | offsets),
        reset_wake=draw(st.none() | st.builds(OneOffWake, due_at=offsets)),
        requested_wake=draw(st.none() | st.builds(OneOffWake, due_at=offsets)),
        watchdog=watchdog,
        ready=draw(st.none() | st.builds(Ready, occurrence_id=st.just("o"),
                                         reason=st.just("watchdog"), at=offsets)),
        pending_approvals=[{"gate": g, "summary": PROVIDER_TEXT} for g in draw(gates)],
        created_at=NOW - timedelta(hours=1), updated_at=NOW)


@given(states(), st.sampled_from(["", CANCEL_REASON, "operator's own reason"]))
def test_every_goal_state_reads_as_one_task_status_in_our_own_words(state, stop_reason):
    view = task_view(state, NOW, stop_reason=stop_reason)
    assert view.status in TASK_STATUSES
    assert PROVIDER_TEXT not in view.message
    assert view.message and "\n" not in view.message
    # A goal that is over is a terminal task, and only then.
    assert view.terminal == state.terminal
    if view.terminal:
        assert view.poll_seconds is None
    else:
        assert MIN_POLL_SECONDS <= view.poll_seconds <= MAX_POLL_SECONDS


@given(states())
def test_an_approval_wait_is_input_required_and_nothing_else_is(state):
    view = task_view(state, NOW)
    waits = state.status == "blocked" and bool(state.pending_approvals)
    assert (view.status == "input_required") == waits
    if waits:
        assert view.gates == tuple(g["gate"] for g in state.pending_approvals)


@given(states(), st.sampled_from(["", CANCEL_REASON, "operator's own reason"]))
def test_only_a_completion_is_a_task_completed_without_error(state, stop_reason):
    view = task_view(state, NOW, stop_reason=stop_reason)
    if view.status == "completed":
        assert view.is_error == (state.status != "done")
    assert (view.status == "cancelled") == (state.status == "stopped"
                                             and stop_reason == CANCEL_REASON)


@given(st.integers(min_value=MAX_POLL_SECONDS, max_value=30 * 86_400))
def test_a_long_pause_is_polled_at_the_bound_not_every_few_seconds(seconds):
    until = NOW + timedelta(seconds=seconds)
    paused = GoalState(status="paused", reason="RATE_LIMITED", paused_until=until,
                       reset_wake=OneOffWake(due_at=until))
    view = task_view(paused, NOW)
    assert view.status == "working" and view.poll_seconds == MAX_POLL_SECONDS
    assert "rate limit" in view.message


@given(st.integers(min_value=1, max_value=MAX_POLL_SECONDS - 1))
def test_a_wait_is_polled_at_its_next_wake(seconds):
    due = NOW + timedelta(seconds=seconds)
    waiting = GoalState(status="waiting", requested_wake=OneOffWake(due_at=due))
    view = task_view(waiting, NOW)
    assert view.poll_seconds == max(MIN_POLL_SECONDS, min(MAX_POLL_SECONDS, seconds + 1))
    assert "next wake" in view.message
