"""One continuation per reset, whoever starts it (ledger.domain.continuations).

After a usage limit pauses a goal, its host may continue the session by
itself (Claude Code's auto-continue, an OpenClaw run), our reset wake may
fire, and the agent may take its lease: in any order, any number of times,
with the holder's turn ending in between, exactly one of them continues the
reset; every later one stands down, recorded.
"""

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.domain import (
    AcquireLease,
    DomainError,
    GoalState,
    LeaseProof,
    ReleaseLease,
    RunGoal,
    StartGoal,
    decide,
    fold,
    iso,
)
from ledger.domain.claims import ClaimWake
from ledger.domain.continuations import (
    CONTINUED_AGAINST_POLICY,
    HOST_CONTINUED,
    NOT_A_RESET,
    STOOD_DOWN,
    HostContinued,
    host_continued,
)
from ledger.domain.kinds import (
    ApprovalRequested,
    ContinuationCharged,
    ContinuationHostMade,
    ContinuationStoodDown,
    LeaseGranted,
    WakeClaimed,
    WakeScheduled,
)
from ledger.domain.liveness import attention
from ledger.domain.runs import ReportRun, ResolveApproval

T0 = datetime(2026, 1, 1, 9, tzinfo=UTC)
RESET = T0 + timedelta(hours=1)
AGENT = "claude-code"


def paused(**policy) -> GoalState:
    """A goal whose run met a usage limit at T0: paused until RESET."""
    start = StartGoal(goal_id="g", workspace="/w", goal_key="k", objective="o",
                      done_criteria=("tests pass",), agent=AGENT, policy=policy,
                      session={"session_key": "s-1"})
    state = fold(decide(GoalState(), RunGoal(start, AGENT, "0" * 64), T0))
    proof = LeaseProof(state.lease.token_sha256, state.lease.generation)
    report = ReportRun(proof, "error", "rate_limit", reset_at=RESET, margin_seconds=0,
                       reset_schedule_name="wakeledger-reset-g")
    return fold(decide(state, report, T0), state)


def host(sha: str = "1" * 64, trigger: str = "session_start") -> HostContinued:
    return HostContinued("claude-code", trigger, AGENT, sha, "s-1")


def wake(n: int = 0) -> ClaimWake:
    # The reset's one-off wake, pushed to a dispatcher that hands over its lease.
    return ClaimWake(f"internal:g@reset:{n}", "internal", "", "2" * 64, kind="reset",
                     push=True)


def continuations_of_the_reset(history: list) -> int:
    """The continuations the history granted for the reset: a granted wake, the
    host's own, or the agent's pull of it."""
    granted = [e.payload for e in history
               if isinstance(e.payload, WakeClaimed) and e.payload.outcome == "recurring_acquired"]
    taken = [e.payload for e in history
             if isinstance(e.payload, LeaseGranted) and e.payload.via in ("host", "pull")]
    return len(granted) + len(taken)


STEPS = st.lists(st.tuples(st.sampled_from(["host", "wake", "pull", "release", "prompt"]),
                           st.integers(min_value=0, max_value=900)), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(STEPS, st.booleans())
def test_one_continuation_per_reset_whoever_starts_it(steps, host_continues):
    state = paused(**({"host_continues": True} if host_continues else {}))
    now, history, attempted, fires = RESET, [], False, 0
    for action, seconds in steps:
        now += timedelta(seconds=seconds)
        if action in ("host", "prompt"):
            command = host(trigger="session_start" if action == "host" else "prompt")
        elif action == "wake":
            fires += 1
            command = wake(fires)
        elif action == "pull":
            command = AcquireLease(AGENT, "3" * 64)
        elif state.lease:  # the holder's turn ends
            command = ReleaseLease(LeaseProof(state.lease.token_sha256,
                                              state.lease.generation))
        else:
            continue
        try:
            events = decide(state, command, now)
        except DomainError:
            continue  # a live lease refused the pull: nothing recorded
        attempted = attempted or action in ("host", "prompt", "wake", "pull")
        history += events
        state = fold(events, state)
    assert continuations_of_the_reset(history) == (1 if attempted else 0)
    # Charged once, whoever continued.
    assert sum(isinstance(e.payload, ContinuationCharged) for e in history) == \
        (1 if attempted else 0)


def test_a_host_continuation_after_the_reset_is_the_one_and_the_wake_stands_down():
    state = paused()
    answer, events = host_continued(state, host(), RESET + timedelta(seconds=5))
    assert answer.outcome == HOST_CONTINUED
    state = fold(events, state)
    assert state.lease.via == "host" and state.continued.by == "host"
    assert state.status == "running" and not state.paused_until and not state.reset_wake
    # The reset wake's row ran before the host's continuation; its claim after it.
    claimed = decide(state, wake(), RESET + timedelta(seconds=6))
    assert [e.payload.outcome for e in claimed] == [STOOD_DOWN]
    # Even once the host's turn ended: it is still the same reset.
    proof = LeaseProof(state.lease.token_sha256, state.lease.generation)
    released = fold(decide(state, ReleaseLease(proof), RESET + timedelta(minutes=5)), state)
    claimed = decide(released, wake(), RESET + timedelta(minutes=6))
    assert [e.payload.outcome for e in claimed] == [STOOD_DOWN]


def test_a_host_continuation_that_loses_to_the_wake_is_told_and_recorded():
    state = paused()
    state = fold(decide(state, wake(), RESET), state)
    assert state.lease.via == "wake"
    answer, events = host_continued(state, host(), RESET + timedelta(seconds=1))
    assert answer.outcome == STOOD_DOWN and answer.continued_by == "wake"
    [down] = events
    assert isinstance(down.payload, ContinuationStoodDown)
    assert "no second continuation" in answer.notes
    assert fold(events, state).lease == state.lease  # the winner keeps its lease


def test_a_host_continuation_before_the_reset_records_nothing():
    answer, events = host_continued(paused(), host(), RESET - timedelta(minutes=1))
    assert (answer.outcome, events) == (NOT_A_RESET, [])
    assert answer.retry_after_seconds == 60


def test_a_host_known_to_continue_gets_its_grace_before_the_wake():
    state = paused(host_continues=True, host_grace_minutes=15)
    assert iso(state.paused_until) == "2026-01-01T10:00:00.000000Z"
    assert iso(state.reset_wake.due_at) == "2026-01-01T10:15:00.000000Z"
    # The host may continue from the reset on.
    answer, _ = host_continued(state, host(), RESET)
    assert answer.outcome == HOST_CONTINUED


def test_quiet_hours_move_the_reset_wake_to_the_end_of_the_window_and_a_host_breach_is_listed():
    quiet = {"start": "09:30", "end": "12:00", "timezone": "UTC"}
    state = paused(resume="quiet_hours", quiet_hours=quiet)
    assert iso(state.reset_wake.due_at) == "2026-01-01T12:00:00.000000Z"
    # A fire inside the window is not due, and its one-off row comes back at the end.
    events = decide(state, wake(), RESET + timedelta(minutes=1))
    assert events[0].payload.outcome == "not_due"
    assert [e.payload.due_at for e in events if isinstance(e.payload, WakeScheduled)] == \
        ["2026-01-01T12:00:00.000000Z"]
    # The host continues inside the window anyway: it ran, so it is recorded,
    # and a person is told.
    answer, events = host_continued(state, host(), RESET + timedelta(minutes=2))
    assert answer.outcome == HOST_CONTINUED and answer.breaks_policy == "quiet_hours"
    after = fold(events, state)
    assert attention(after) == CONTINUED_AGAINST_POLICY


def test_ask_waits_for_a_persons_approval_then_wakes_the_goal():
    state = paused(resume="ask")
    events = decide(state, wake(), RESET)
    assert events[0].payload.outcome == "approval_required"
    assert any(isinstance(e.payload, ApprovalRequested) for e in events)
    state = fold(events, state)
    assert (state.status, state.reason) == ("blocked", "BLOCKED_APPROVAL")
    # The host continues before anyone approved: recorded against the policy, no lease.
    answer, recorded = host_continued(state, host(), RESET + timedelta(minutes=1))
    assert answer.outcome == STOOD_DOWN and answer.breaks_policy == "ask"
    assert isinstance(recorded[0].payload, ContinuationHostMade) and not fold(recorded,
                                                                             state).lease
    approved = decide(state, ResolveApproval("resume", "approve", "ops"),
                      RESET + timedelta(minutes=5))
    [scheduled] = [e.payload for e in approved if isinstance(e.payload, WakeScheduled)]
    assert scheduled.kind == "reset" and scheduled.due_at == "2026-01-01T10:05:00.000000Z"
    state = fold(approved, state)
    granted = decide(state, wake(9), RESET + timedelta(minutes=5))
    assert granted[0].payload.outcome == "recurring_acquired"


def test_a_reset_the_agent_pulled_itself_is_not_continued_again_by_its_wake():
    """The host's `claude --resume` took its lease after the reset (the pull)
    before the reset wake's claim: the wake stands down, even once that turn
    ended, instead of dispatching a second `claude --resume`."""
    state = paused()
    state = fold(decide(state, AcquireLease(AGENT, "3" * 64), RESET + timedelta(seconds=1)),
                 state)
    proof = LeaseProof(state.lease.token_sha256, state.lease.generation)
    state = fold(decide(state, ReleaseLease(proof), RESET + timedelta(seconds=30)), state)
    claimed = decide(state, wake(), RESET + timedelta(seconds=31))
    assert [e.payload.outcome for e in claimed] == [STOOD_DOWN]
