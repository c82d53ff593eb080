"""HOST_SILENT means the host's deadline passed, nothing else.

The sweeper's check of a host goal took the goal's *earliest* deadline, which
may be its progress deadline, and recorded HOST_SILENT whenever that one
passed: a host firing on schedule was listed as silent, its agent told to
re-create a task that existed (seed 2, 30 days: 3,332 re-creations for 9
dropped tasks), and an early fire could not end the listing. The progress
deadline is NO_PROGRESS's."""

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.domain import GoalState, RunGoal, StartGoal, decide, fold, liveness
from ledger.domain.commands import RecordCheckpoint
from ledger.domain.kinds import LivenessMissed
from ledger.domain.overdue import CheckLiveness
from ledger.domain.watchdogs import PrepareWatchdog, RecordReceipt
from tests.factories import proof_of

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
TOKEN, REF = "1" * 64, "f" * 64


def apply(state: GoalState, command, when: datetime) -> GoalState:
    return fold(decide(state, command, when), state)


def waiting_host_goal(interval: int, slots: int, receipt_after: int) -> GoalState:
    """A host goal started at T0 whose host task's receipt (its first run
    ``receipt_after`` seconds after the slot the server prepared) came that
    much later, and whose agent then ended its turn cleanly: the host is
    heard from, its next slot ahead; no lease."""
    start = StartGoal(goal_id="g-1", workspace="/w", goal_key="k", objective="o",
                      agent="agent-1", policy={"scheduler": "host", "host_silent_slots": slots,
                                               "cadence_minutes": interval // 60})
    state = apply(GoalState(), RunGoal(start, "agent-1", TOKEN), T0)
    state = apply(state, PrepareWatchdog(proof_of(state), interval, "UTC", "wd"), T0)
    later = T0 + timedelta(seconds=receipt_after)
    first = state.watchdog.first_due_at
    state = apply(state, RecordReceipt(proof_of(state), "created", REF,
                                       (first + timedelta(seconds=receipt_after))
                                       .strftime("%Y-%m-%dT%H:%M:%SZ")), later)
    state = apply(state, RecordCheckpoint("turn", 10, release_lease=True,
                                          proof=proof_of(state)), later)
    assert not state.lease and state.watchdog.status == "live"
    return state


def host_deadline(state: GoalState) -> datetime:
    """The host's own deadline, from the policy: the recorded slot, the other
    silent slots, half an interval of lateness."""
    every = timedelta(seconds=state.interval_seconds)
    due = state.watchdog.next_due_at
    return due + (state.setting("host_silent_slots") - 1) * every + every / 2


def missed(state: GoalState, now: datetime) -> list[str]:
    return [event.payload.reason for event in decide(state, CheckLiveness(), now)
            if isinstance(event.payload, LivenessMissed)]


def test_a_passed_progress_deadline_of_a_host_goal_is_no_progress_not_host_silent():
    """The trace: a host goal with 3 silent slots of an hour, its task's slot
    still ahead; its progress deadline (2 h 30 after the last checkpoint)
    passes first. NO_PROGRESS, not HOST_SILENT."""
    state = waiting_host_goal(3600, 3, 0)
    progress = liveness.progress_expectation(state).deadline
    assert progress < host_deadline(state)
    assert missed(state, progress + timedelta(minutes=1)) == [liveness.NO_PROGRESS]


@settings(max_examples=80, deadline=None)
@given(interval=st.sampled_from([900, 1800, 3600, 7200]),
       slots=st.integers(min_value=1, max_value=6),
       receipt_after=st.integers(min_value=0, max_value=3 * 3600),
       at=st.integers(min_value=0, max_value=30 * 3600))
def test_host_silent_only_past_the_hosts_own_deadline(interval, slots, receipt_after, at):
    """Property: the sweeper records HOST_SILENT for a host goal only once its
    host's own deadline passed; before it, a passed progress deadline is
    NO_PROGRESS."""
    state = waiting_host_goal(interval, slots, receipt_after)
    now = T0 + timedelta(seconds=at)
    reasons = missed(state, now)
    if now < host_deadline(state):
        assert liveness.HOST_SILENT not in reasons
        progress = liveness.progress_expectation(state).deadline
        assert reasons == ([liveness.NO_PROGRESS] if now >= progress else [])
    else:
        assert reasons == [liveness.HOST_SILENT]
