"""A run report that ends nothing (outcome ``note``): a failure the turn went
on through (a subagent's, a helper query's), the host's own wait for a
provider's reset, a continuation that had to start a new session. None
pauses, blocks, charges or gives back the lease; a provider wait is shown
while its lease holds and its reset is ahead, and the progress clock starts
again at the reset."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.domain import (
    GoalState,
    Heartbeat,
    ReleaseLease,
    RunGoal,
    StartGoal,
    decide,
    fold,
    iso,
    liveness,
)
from ledger.domain.errors import InvalidCommand
from ledger.domain.runs import NOTES, PROVIDER_WAIT, ReportRun, provider_wait
from tests.factories import proof_of

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
TOKEN = "1" * 64


def apply(state: GoalState, command, when: datetime) -> GoalState:
    return fold(decide(state, command, when), state)


def running() -> GoalState:
    start = StartGoal(goal_id="g-1", workspace="/w", goal_key="k", objective="o",
                      agent="agent-1")
    state = apply(GoalState(), RunGoal(start, "agent-1", TOKEN), T0)
    assert state.status == "running" and state.lease
    return state


@settings(max_examples=40, deadline=None)
@given(note=st.sampled_from(NOTES), error_class=st.sampled_from(
    ["", "rate_limit", "auth", "unclassified", "request_too_large", "owner_verification"]),
    minutes=st.integers(min_value=1, max_value=600))
def test_a_note_never_pauses_blocks_ends_or_charges(note, error_class, minutes):
    """Property: whatever it notes and whatever the class (an auth failure of a
    subagent too), the goal stays running under the same lease."""
    state = running()
    reset = T0 + timedelta(minutes=minutes)
    after = apply(state, ReportRun(proof_of(state), "note", error_class, reset_at=reset,
                                   note=note), T0 + timedelta(seconds=5))
    assert (after.status, after.reason, after.paused_until) == ("running", "", None)
    assert after.lease.generation == state.lease.generation
    assert after.continuations_used == 0 and after.rate_limits == 0
    [event] = decide(state, ReportRun(proof_of(state), "note", error_class, reset_at=reset,
                                      note=note), T0)
    assert event.payload.outcome == "note" and event.payload.note == note


def test_the_same_failure_reported_as_the_turns_end_pauses():
    """The contrast the notes exist for: a rate limit that ended the turn pauses."""
    state = running()
    after = apply(state, ReportRun(proof_of(state), "error", "rate_limit",
                                   reset_at=T0 + timedelta(hours=2)), T0)
    assert after.status == "paused"


def test_a_provider_wait_is_shown_while_its_lease_holds_and_its_reset_is_ahead():
    state = running()
    reset = T0 + timedelta(hours=3)
    waiting = apply(state, ReportRun(proof_of(state), "note", "rate_limit", reset_at=reset,
                                     note=PROVIDER_WAIT), T0 + timedelta(minutes=1))
    wait = provider_wait(waiting, T0 + timedelta(hours=1))
    assert iso(wait.until) == "2026-12-02T12:00:00.000000Z" and wait.error_class == "rate_limit"
    # A heartbeat keeps it; the reset passing or the lease ending ends it.
    beaten = apply(waiting, Heartbeat(proof_of(waiting)), T0 + timedelta(minutes=2))
    assert provider_wait(beaten, T0 + timedelta(hours=2))
    assert provider_wait(beaten, reset) is None
    released = apply(beaten, ReleaseLease(proof_of(beaten)), T0 + timedelta(minutes=3))
    assert provider_wait(released, T0 + timedelta(minutes=4)) is None
    again = apply(released, RunGoal(StartGoal(goal_id="g-1", workspace="/w", goal_key="k",
                                              objective="o", agent="agent-1"),
                                    "agent-1", "2" * 64), T0 + timedelta(minutes=5))
    assert again.lease and provider_wait(again, T0 + timedelta(minutes=6)) is None


def test_a_provider_wait_moves_the_progress_deadline_past_its_reset():
    """Hours inside the host's retry are not hours without progress: the
    NO_PROGRESS deadline counts from the reset, as after a pause."""
    state = running()
    before = liveness.progress_expectation(state).deadline
    reset = T0 + timedelta(hours=5)
    waiting = apply(state, ReportRun(proof_of(state), "note", "rate_limit", reset_at=reset,
                                     note=PROVIDER_WAIT), T0 + timedelta(minutes=1))
    after = liveness.progress_expectation(waiting).deadline
    assert before < reset < after
    assert after == reset + timedelta(minutes=waiting.setting("progress_minutes"))


@pytest.mark.parametrize(("note", "reset", "field"), [
    ("somewhere_else", T0, "note"),
    (PROVIDER_WAIT, None, "retry_after"),  # a wait must say until when
])
def test_a_note_the_domain_cannot_read_is_refused(note, reset, field):
    state = running()
    with pytest.raises(InvalidCommand) as refused:
        decide(state, ReportRun(proof_of(state), "note", "rate_limit", reset_at=reset,
                                note=note), T0)
    assert refused.value.field == field
