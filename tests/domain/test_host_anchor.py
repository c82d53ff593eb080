"""A host goal whose receipt's due_at is off the host task's real slots
(seed 2, 30 days: a typo 50 minutes late, accepted within the receipt's
tolerance). The host fires at its true slots; the goal must either move
(the host's consistent offset re-anchors its slots) or be listed — never
neither. A host that fires too often still gets ``not_due``."""

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.domain import GoalState, RunGoal, StartGoal, decide, fold, liveness, timing
from ledger.domain.claims import ClaimWake
from ledger.domain.events import iso
from ledger.domain.overdue import CheckLiveness
from ledger.domain.runs import ReportRun
from ledger.domain.watchdogs import PrepareWatchdog, RecordReceipt
from tests.factories import proof_of

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
TOKEN, REF = "1" * 64, "f" * 64
TOLERANCE = timing.EARLY_TOLERANCE_SECONDS


def apply(state: GoalState, command, when: datetime) -> GoalState:
    return fold(decide(state, command, when), state)


def paused_host_goal(interval: int, offset: int, **policy) -> tuple[GoalState, datetime]:
    """A host goal paused by a rate limit (its pause over before the first
    slot) whose receipt says ``offset`` seconds off the slot the server
    prepared — which is when the host's task really fires. Returns the goal
    and the host's true first slot."""
    start = StartGoal(goal_id="g-1", workspace="/w", goal_key="k", objective="o",
                      agent="agent-1", policy={"scheduler": "host", **policy})
    state = apply(GoalState(), RunGoal(start, "agent-1", TOKEN), T0)
    state = apply(state, PrepareWatchdog(proof_of(state), interval, "UTC", "wd"), T0)
    true_first = state.watchdog.first_due_at
    recorded = (true_first + timedelta(seconds=offset)).strftime("%Y-%m-%dT%H:%M:%SZ")
    state = apply(state, RecordReceipt(proof_of(state), "created", REF, recorded), T0)
    # Paused (no lease, no progress deadline): only the host's claim moves it.
    state = apply(state, ReportRun(proof_of(state), "error", "rate_limit",
                                   reset_at=T0 + timedelta(minutes=5)), T0 + timedelta(minutes=1))
    assert state.status == "paused" and not state.lease
    return state, true_first


def host_fire(state: GoalState, now: datetime) -> tuple[GoalState, str]:
    events = decide(state, ClaimWake("", "host", "agent-1", "2" * 64), now)
    outcome = events[0].payload.outcome if events else "nothing"
    return fold(events, state), outcome


def test_seed2_a_typo_50_minutes_late_resumes_at_the_hosts_second_fire():
    state, true_first = paused_host_goal(7200, 50 * 60)
    state, first = host_fire(state, true_first + timedelta(seconds=5))
    assert first == "not_due"
    # The early fire claimed no slot: the recorded due (and its deadline) stay.
    assert state.watchdog.next_due_at == true_first + timedelta(minutes=50)
    second_at = true_first + timedelta(hours=2, seconds=9)
    state, second = host_fire(state, second_at)
    assert second == "recurring_acquired" and state.lease
    # The earlier offset of the two fires (5 s, not 9 s) is the new anchor.
    anchor = true_first + timedelta(hours=2, seconds=5)
    assert state.watchdog.anchor == anchor
    assert state.watchdog.next_due_at == anchor + timedelta(hours=2)
    assert state.watchdog.early_fire is None
    # The next true slot is now on time.
    assert timing.early_by(state.watchdog, timing.slot_of(state.watchdog, true_first
                           + timedelta(hours=4)), true_first + timedelta(hours=4)) == 0


@settings(max_examples=60, deadline=None)
@given(interval=st.sampled_from([1800, 3600, 7200, 14400]),
       fraction=st.floats(min_value=-1.4, max_value=1.4),
       jitters=st.lists(st.integers(min_value=-25, max_value=60), min_size=2, max_size=6))
def test_a_host_at_any_constant_offset_resumes_the_goal_within_two_fires(interval, fraction,
                                                                          jitters):
    """Property: whatever the receipt's offset from the host's true slots,
    the host's fires resume the goal by its second fire, and until then the
    goal's deadline never moves past the recorded due's HOST_SILENT bound."""
    state, true_first = paused_host_goal(interval, round(fraction * interval))
    every = timedelta(seconds=interval)
    recorded = state.watchdog.next_due_at
    bound = recorded + (state.setting("host_silent_slots") - 1) * every + every / 2
    outcomes = []
    for k, jitter in enumerate(jitters):
        now = true_first + k * every + timedelta(seconds=jitter)
        state, outcome = host_fire(state, now)
        outcomes.append(outcome)
        if outcome == "recurring_acquired":
            break
        assert outcome == "not_due"
        assert liveness.deadline_at(state) <= bound
    assert "recurring_acquired" in outcomes[:2], outcomes


@settings(max_examples=60, deadline=None)
@given(interval=st.sampled_from([1800, 3600, 7200]),
       period_fraction=st.floats(min_value=0.02, max_value=0.85),
       start=st.integers(min_value=0, max_value=7200), fires=st.integers(min_value=3, max_value=40))
def test_a_host_firing_too_often_still_gets_not_due_and_is_listed(interval, period_fraction,
                                                                   start, fires):
    """Property: a runaway host (consecutive fires less than an interval
    apart, minus the re-anchor tolerance) never moves the anchor, every fire
    early for its slot is ``not_due``, no early fire moves the deadline, and
    past it the sweeper lists the goal HOST_SILENT."""
    state, true_first = paused_host_goal(interval, 0)
    anchor = state.watchdog.anchor
    period = timedelta(seconds=max(60.0, period_fraction * interval
                                   - timing.reanchor_tolerance(state.watchdog) - 1))
    now = true_first + timedelta(seconds=start)
    for _ in range(fires):
        slot = timing.slot_of(state.watchdog, now)
        early = timing.early_by(state.watchdog, slot, now) > 0
        before = liveness.deadline_at(state)
        state, outcome = host_fire(state, now)
        assert state.watchdog.anchor == anchor
        if early:
            assert outcome == "not_due"
            assert liveness.deadline_at(state) == before
        if not early or state.lease:
            return  # it fired on a slot: that is no runaway wake
        now += period
    deadline = liveness.deadline_at(state)
    if deadline is not None:
        listed = apply(state, CheckLiveness(), deadline + timedelta(minutes=1))
        assert liveness.attention(listed) == liveness.HOST_SILENT


def test_early_fires_leave_host_silent_standing_and_the_deadline_fixed():
    state, true_first = paused_host_goal(3600, 0)
    due = state.watchdog.next_due_at
    # Fires 20 or 40 minutes apart (never an interval), each more than a
    # minute before its slot.
    fires = [true_first + timedelta(minutes=m) for m in (-25, -5, 35, 55)]
    for when in fires:
        state, outcome = host_fire(state, when)
        assert outcome == "not_due"
        assert state.watchdog.next_due_at == due
    deadline = liveness.deadline_at(state)
    assert deadline == due + timedelta(minutes=90)
    listed = apply(state, CheckLiveness(), deadline + timedelta(minutes=1))
    assert liveness.attention(listed) == liveness.HOST_SILENT
    # A further early fire proves a host, not that it claims its slots.
    still, outcome = host_fire(listed, deadline + timedelta(minutes=10))
    assert outcome == "not_due"
    assert liveness.attention(still) == liveness.HOST_SILENT


def test_a_new_receipt_forgets_an_early_fire():
    state, true_first = paused_host_goal(3600, 20 * 60)
    state, outcome = host_fire(state, true_first)
    assert outcome == "not_due" and state.watchdog.early_fire
    # Its agent comes back (a lease) and records the host task's real time.
    again = StartGoal(goal_id="g-1", workspace="/w", goal_key="k", objective="o",
                      agent="agent-1", policy={"scheduler": "host"})
    state = apply(state, RunGoal(again, "agent-1", "3" * 64), true_first + timedelta(minutes=1))
    assert state.lease
    state = apply(state, RecordReceipt(proof_of(state), "created", REF,
                                       iso(true_first + timedelta(hours=1))),
                  true_first + timedelta(minutes=2))
    assert state.watchdog.early_fire is None
