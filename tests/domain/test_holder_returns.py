"""A holder the server could not hear, or that came back after its lease went
stale, is not judged an uncertain attempt gone silent, and its clean end is not
charged against the continuation budget. Seed 2's 30-day world broke both:

* a late fire found the lease stale and made the goal ready as a charged
  recovery; the same holder then renewed, checkpointed and released cleanly,
  and its next pull was charged anyway (``only_recovery_is_charged``);
* fires right after a database outage judged INTERRUPTED_UNKNOWN (or a
  charged recovery) for holders whose heartbeats the outage had refused, where
  the sweeper gives them RECONNECT_GRACE (``interrupted_only_after_silence``).
"""

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.domain import (
    AcquireLease,
    GoalState,
    Heartbeat,
    RecordCheckpoint,
    ReleaseLease,
    RunGoal,
    StartGoal,
    decide,
    fold,
)
from ledger.domain.claims import ClaimWake, claim_outcome
from ledger.domain.leases import RECONNECT_GRACE, lease_stale_at
from ledger.domain.overdue import CheckLiveness
from ledger.domain.watchdogs import PrepareWatchdog
from tests.factories import proof_of

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
TOKEN, TOKEN_2, TOKEN_3 = "1" * 64, "2" * 64, "3" * 64
HOUR = 3600


def apply(state: GoalState, command, when: datetime) -> GoalState:
    return fold(decide(state, command, when), state)


def kinds(state: GoalState, command, when: datetime) -> list[str]:
    return [event.kind for event in decide(state, command, when)]


def watched() -> GoalState:
    """An internal goal with an hourly watchdog (slots at 10:00, 11:00, …),
    its agent holding generation 1 (lease 600 s, stale 60 s after)."""
    start = StartGoal(goal_id="g-1", workspace="/w", goal_key="k", objective="o",
                      agent="agent-1", policy={"scheduler": "internal"})
    state = apply(GoalState(), RunGoal(start, "agent-1", TOKEN), T0)
    return apply(state, PrepareWatchdog(proof_of(state), HOUR, "UTC", "wd-g-1"), T0)


def fire(occurrence: str, *, push: bool = False, kind: str = "requested",
         unheard: tuple[datetime, datetime] | None = None) -> ClaimWake:
    """django-q2 firing a wake (by default a one-off, due whenever it fires;
    the sweeper's timeout recovery is one)."""
    return ClaimWake(occurrence, "internal", "agent-1", TOKEN_2, push=push, kind=kind,
                     unheard=unheard)


# ------------------------------------------------ the holder's own clean release


@settings(max_examples=60, deadline=None)
@given(late=st.integers(0, 1800), back=st.integers(1, 600), work=st.integers(0, 3),
       by_checkpoint=st.booleans(), pulled_after=st.integers(1, 1800))
def test_a_recovery_made_ready_is_not_charged_once_its_holder_releases_cleanly(
        late, back, work, by_checkpoint, pulled_after):
    """Whenever a fire finds the holder's lease stale (``late`` past its stale
    point), it makes the goal ready as a charged recovery; if that holder comes
    back (``back`` later), renews, works and releases cleanly, pulling the
    wake is scheduled progress: nothing is charged."""
    state = watched()
    stale = lease_stale_at(state)
    assert stale is not None
    claimed_at = stale + timedelta(seconds=late)
    state = apply(state, fire("internal:g-1@slot"), claimed_at)
    assert state.ready and state.ready.charge  # a recovery, as judged then
    now = claimed_at + timedelta(seconds=back)
    state = apply(state, Heartbeat(proof_of(state)), now)  # the holder is back
    for step in range(work):
        now += timedelta(seconds=120)
        state = apply(state, RecordCheckpoint(f"step {step}", 10 + step,
                                              proof=proof_of(state)), now)
    now += timedelta(seconds=60)
    release = (RecordCheckpoint("turn done", 20, release_lease=True, proof=proof_of(state))
               if by_checkpoint else ReleaseLease(proof_of(state)))
    state = apply(state, release, now)
    assert state.lease_end == "released"
    pulled = kinds(state, AcquireLease("agent-1", TOKEN_3), now + timedelta(seconds=pulled_after))
    assert "lease.acquired" in pulled
    assert "continuation.charged" not in pulled


def test_a_holder_that_never_comes_back_is_still_charged_for():
    """The other side of the continuation budget: the same ready wake, its holder silent until
    the sweeper expires the lease, is a recovery when pulled."""
    state = watched()
    stale = lease_stale_at(state)
    assert stale is not None
    state = apply(state, fire("internal:g-1@slot"), stale + timedelta(seconds=30))
    state = apply(state, CheckLiveness(), stale + timedelta(seconds=60))
    assert state.lease_end == "expired"
    pulled = kinds(state, AcquireLease("agent-1", TOKEN_3), stale + timedelta(seconds=120))
    assert pulled[0] == "continuation.charged"


def test_a_holder_that_comes_back_and_goes_silent_again_is_charged_for():
    """A renewal alone does not end the attempt cleanly: a holder that renews
    once and then dies leaves a recovery to charge."""
    state = watched()
    stale = lease_stale_at(state)
    assert stale is not None
    state = apply(state, fire("internal:g-1@slot"), stale + timedelta(seconds=30))
    state = apply(state, Heartbeat(proof_of(state)), stale + timedelta(seconds=60))
    silent = lease_stale_at(state)
    assert silent is not None
    state = apply(state, CheckLiveness(), silent + timedelta(seconds=1))
    pulled = kinds(state, AcquireLease("agent-1", TOKEN_3), silent + timedelta(seconds=120))
    assert pulled[0] == "continuation.charged"


# ------------------------------------------------ a fire right after an outage


def pushed_continuation() -> GoalState:
    """Generation 2, handed over by a pushed wake at 10:00: if it goes silent,
    it is an uncertain attempt."""
    state = watched()
    state = apply(state, RecordCheckpoint("turn 1", 5, release_lease=True,
                                          proof=proof_of(state)), T0 + timedelta(minutes=5))
    slot = T0 + timedelta(hours=1)
    state = apply(state, fire("internal:g-1@10", push=True, kind="recurring"), slot)
    assert state.lease.via == "wake" and not state.lease.active
    return state


@settings(max_examples=80, deadline=None)
@given(down_before=st.integers(1, 900), down_for=st.integers(60, 4 * HOUR),
       after=st.integers(0, 2 * 60 * 60))
def test_a_fire_after_an_outage_gives_the_holder_the_sweepers_reconnect_grace(
        down_before, down_for, after):
    """The lease went stale while no sweep could complete (the database or
    the scheduler was down: the holder's heartbeats may have been refused). A
    fire ``after`` seconds past the outage's end judges the holder exactly as
    the sweeper does: busy (worker_busy_noop, nothing charged or recorded as
    silence) until RECONNECT_GRACE after the outage, silent
    (INTERRUPTED_UNKNOWN) only from then on."""
    state = pushed_continuation()
    stale = lease_stale_at(state)
    assert stale is not None
    unheard = (stale - timedelta(seconds=down_before),
               stale - timedelta(seconds=down_before) + timedelta(seconds=down_for))
    now = max(stale, unheard[1]) + timedelta(seconds=after)
    answer = claim_outcome(state, fire("internal:g-1@11", unheard=unheard), now)
    swept = kinds(state, CheckLiveness(unheard=unheard), now)
    if now < unheard[1] + RECONNECT_GRACE:
        assert answer["outcome"] == "worker_busy_noop", answer
        assert 0 < answer["retry_after_seconds"] <= RECONNECT_GRACE.total_seconds()
        assert "goal.blocked" not in swept
    else:
        assert answer["outcome"] == "terminal_cleanup_required" and answer["interrupted"]
        assert swept[:2] == ["lease.expired", "goal.blocked"]


def test_without_an_outage_a_silent_continuation_is_interrupted_at_its_stale_point():
    """No unheard window: interrupted as before, at the stale point itself."""
    state = pushed_continuation()
    stale = lease_stale_at(state)
    assert stale is not None
    early = claim_outcome(state, fire("internal:g-1@11"), stale - timedelta(seconds=1))
    assert early["outcome"] == "worker_busy_noop"
    late = claim_outcome(state, fire("internal:g-1@11"), stale)
    assert late["outcome"] == "terminal_cleanup_required" and late["interrupted"]


def test_an_outage_that_ended_before_the_lease_went_stale_changes_nothing():
    state = pushed_continuation()
    stale = lease_stale_at(state)
    assert stale is not None
    unheard = (stale - timedelta(minutes=30), stale - timedelta(minutes=20))
    answer = claim_outcome(state, fire("internal:g-1@11", unheard=unheard), stale)
    assert answer["outcome"] == "terminal_cleanup_required" and answer["interrupted"]


def test_a_stale_non_continuation_lease_after_an_outage_is_not_a_charged_recovery_yet():
    """Seed 2, day 5: the fire 7 s after the database came back found the
    agent's own lease stale and made the goal ready as a charged recovery; with
    the outage known, the holder is still busy (its renewal two minutes later
    keeps the goal its own)."""
    state = watched()
    stale = lease_stale_at(state)
    assert stale is not None
    unheard = (stale - timedelta(minutes=10), stale + timedelta(minutes=1, seconds=27))
    now = unheard[1] + timedelta(seconds=7)
    answer = claim_outcome(state, fire("internal:g-1@slot", unheard=unheard), now)
    assert answer["outcome"] == "worker_busy_noop"
    events = decide(state, fire("internal:g-1@slot", unheard=unheard), now)
    assert [event.kind for event in events] == ["wake.claimed"]
    assert fold(events, state).ready is None
