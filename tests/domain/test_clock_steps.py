"""A clock stepped forward and back (ledger.domain.clocksteps): stamps from the
future come back to now, so no deadline or lease lies further away than the
policy allows from the moment the step is seen."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.domain import GoalState, Heartbeat, LeaseProof, RecordCheckpoint, decision, liveness
from ledger.domain.clocksteps import CLOCK_SKEW, ahead_by, recording_time
from ledger.domain.kinds import ClockSteppedBack, LeaseExpired, LivenessMissed
from ledger.domain.overdue import CheckLiveness
from ledger.domain.parts import LivenessAlert
from tests.domain.test_progress_properties import TOKEN, running

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def started_at(at: datetime) -> GoalState:
    """A goal run (lease taken) at ``at``, as ``running`` does at its own T0."""
    from ledger.domain import RunGoal, StartGoal, decide, fold

    start = StartGoal(goal_id="g", workspace="/w", goal_key="k", objective="o",
                      policy={"lease_seconds": 300})
    return fold(decide(GoalState(), RunGoal(start, holder="w", token_sha256=TOKEN), at))


def gap(state: GoalState, now: datetime) -> timedelta:
    deadline = liveness.deadline_at(state)
    assert deadline is not None
    return deadline - now


@settings(max_examples=60, deadline=None)
@given(ahead=st.timedeltas(min_value=CLOCK_SKEW + timedelta(seconds=1),
                           max_value=timedelta(days=30)),
       window=st.integers(0, 280), back_after=st.integers(0, 600))
def test_a_holder_that_died_while_the_clock_ran_ahead_expires_within_its_lease(
        ahead: timedelta, window: int, back_after: int) -> None:
    """The clock runs ``ahead`` for ``window`` seconds (the holder heartbeats
    and checkpoints, then dies) and is set back: the next liveness check
    records the step, and the goal's deadline is no further than a goal run
    at that moment would have; once that passes, the lease expires."""
    wrong = T0 + ahead
    state = started_at(wrong)
    proof = LeaseProof(TOKEN, state.lease.generation)
    state = decision(state, Heartbeat(proof), wrong + timedelta(seconds=window / 2)).state
    state = decision(state, RecordCheckpoint(current_step="s", progress_pct=10, proof=proof),
                     wrong + timedelta(seconds=window)).state
    # The real clock, set back, read while it is still behind the last event
    # by more than the skew bound (later, the stamps are simply in the past).
    behind = ahead - CLOCK_SKEW - timedelta(seconds=1)
    now = T0 + timedelta(seconds=window) + min(timedelta(seconds=back_after), behind)
    decided = decision(state, CheckLiveness(), now)
    assert isinstance(decided.events[0].payload, ClockSteppedBack)
    after = decided.state
    assert ahead_by(after, now) is None
    assert gap(after, now) <= gap(started_at(now), now)
    assert liveness.label(after, now) == liveness.WORKING
    later = now + gap(started_at(now), now) + timedelta(seconds=1)
    expired = decision(after, CheckLiveness(), later).events
    assert any(isinstance(e.payload, LeaseExpired) for e in expired)


def test_a_live_holder_goes_on_after_the_step() -> None:
    """A holder still alive heartbeats after the step: the heartbeat records
    the correction first and renews from the real now."""
    wrong = T0 + timedelta(hours=2)
    state = started_at(wrong)
    proof = LeaseProof(TOKEN, state.lease.generation)
    now = T0 + timedelta(minutes=3)
    decided = decision(state, Heartbeat(proof), now)
    assert isinstance(decided.events[0].payload, ClockSteppedBack)
    assert decided.state.lease.expires_at == now + timedelta(seconds=300)
    assert decided.state.updated_at == now


def test_the_progress_clock_restarts_from_the_real_now_not_the_future() -> None:
    """No checkpoint after the step: NO_PROGRESS comes ``progress_minutes``
    after the step was seen, not hours after."""
    wrong = T0 + timedelta(hours=5)
    state = started_at(wrong)
    now = T0 + timedelta(minutes=1)
    after = decision(state, CheckLiveness(), now).state
    bound = timedelta(minutes=after.setting("progress_minutes"))
    since = liveness.progress_since(after)
    assert since <= now
    expected = liveness.progress_expectation(after)
    assert expected is not None and expected.deadline is not None
    assert expected.deadline <= now + bound


def test_the_stamps_progress_counts_from_come_back_too() -> None:
    """The first wake's and the first job wait's stamps since the last
    progress start clocks as well: left in the future, a woken holder that
    died during the step had its progress deadline hours away."""
    wrong = T0 + timedelta(hours=8)
    state = started_at(wrong).but(since_progress={"leases": 2, "woken_at": wrong.isoformat(),
                                                  "waited_at": wrong.isoformat()},
                                  paused_at=wrong)
    now = T0 + timedelta(minutes=1)
    after = decision(state, CheckLiveness(), now).state
    for stamp in (after.since_progress["woken_at"], after.since_progress["waited_at"]):
        assert datetime.fromisoformat(stamp) <= now
    assert after.paused_at <= now
    assert after.since_progress["leases"] == 2


@settings(max_examples=40, deadline=None)
@given(behind=st.timedeltas(min_value=timedelta(0), max_value=CLOCK_SKEW))
def test_clocks_a_little_apart_never_record_time_running_backwards(behind: timedelta) -> None:
    """Within the skew bound another host's clock is one clock among several:
    the command is recorded at the last event, and nothing is corrected."""
    state = started_at(T0)
    now = T0 - behind
    assert recording_time(state, now) == (T0 if behind else now)
    assert ahead_by(state, now) is None
    assert not any(isinstance(e.payload, ClockSteppedBack)
                   for e in decision(state, CheckLiveness(), T0).events)


def test_an_ended_goal_is_never_corrected() -> None:
    state = running()
    ended = state.but(status="done")
    assert ahead_by(ended, T0 - timedelta(hours=3)) is None


def test_the_correction_is_one_event_that_replays() -> None:
    from ledger.domain import fold

    state = started_at(T0 + timedelta(hours=2))
    decided = decision(state, CheckLiveness(), T0)
    assert fold(decided.events, state) == decided.state
    assert not any(isinstance(e.payload, LivenessMissed) for e in decided.events)


def test_a_silence_judged_while_the_clock_ran_ahead_is_withdrawn() -> None:
    """The sweeper, hours ahead, found a host's slot and a job's report
    overdue; the real clock says neither was: the step withdraws both, and
    the check at the real time raises nothing. An alert judged before the
    clock ran ahead stays."""
    wrong = T0 + timedelta(hours=8)
    job = {"job_id": "j", "kind": "ci", "ref": "r", "status": "running",
           "tracked_at": wrong.isoformat(), "silent_at": wrong.isoformat()}
    state = started_at(wrong).but(
        liveness_alert=LivenessAlert(reason=liveness.HOST_SILENT, at=wrong, detail="d"),
        jobs=[job])
    now = T0 + timedelta(minutes=1)
    after = decision(state, CheckLiveness(), now).state
    assert after.liveness_alert is None
    assert "silent_at" not in after.jobs[0]
    assert liveness.attention(after) != liveness.HOST_SILENT
    judged_before = state.but(liveness_alert=replace(state.liveness_alert, at=T0))
    assert decision(judged_before, CheckLiveness(), now).state.liveness_alert.reason \
        == liveness.HOST_SILENT


def test_a_fact_recorded_while_the_clock_ran_ahead_stays() -> None:
    """A host that continued against the goal's policy did so, whatever the clock read."""
    wrong = T0 + timedelta(hours=8)
    alert = LivenessAlert(reason="CONTINUED_AGAINST_POLICY", at=wrong, detail="d")
    state = started_at(wrong).but(liveness_alert=alert)
    after = decision(state, CheckLiveness(), T0 + timedelta(minutes=1)).state
    assert after.liveness_alert.reason == "CONTINUED_AGAINST_POLICY"


# ------------------------------------------- a block judged on a clock ahead


READY_TIMEOUT = timedelta(minutes=30)


def ready_goal() -> tuple[GoalState, datetime]:
    """An internal goal whose agent released its lease, then its first slot
    found it ready for the agent's pull (dispatcher none): the state and the
    slot it became ready at."""
    from ledger.domain import ReleaseLease, fold
    from ledger.domain.claims import ClaimWake
    from ledger.domain.events import iso
    from ledger.domain.watchdogs import PrepareWatchdog

    state = running(ready_timeout_minutes=int(READY_TIMEOUT.total_seconds() // 60))
    proof = LeaseProof(TOKEN, state.lease.generation)
    state = decision(state, PrepareWatchdog(proof, interval_seconds=3600), T0).state
    state = decision(state, ReleaseLease(proof), T0 + timedelta(seconds=30)).state
    slot = state.watchdog.next_due_at
    events = decision(state, ClaimWake(f"internal:g@{iso(slot)}", "internal", "w", "b" * 64,
                                       intended_at=iso(slot)), slot).events
    assert [e.data["outcome"] for e in events if e.kind == "wake.claimed"] == ["ready_for_pull"]
    state = fold(events, state)
    assert state.ready is not None and state.status == "waiting"
    return state, slot


def blocked_unclaimed(state: GoalState, at: datetime) -> GoalState:
    decided = decision(state, CheckLiveness(), at)
    assert (decided.state.status, decided.state.reason) == ("blocked", "READY_UNCLAIMED")
    return decided.state


@settings(max_examples=40, deadline=None)
@given(waited=st.integers(0, 29 * 60),
       ahead=st.timedeltas(min_value=timedelta(hours=1), max_value=timedelta(days=3)),
       back_after=st.integers(0, 3_000),
       command=st.sampled_from(["check", "pull", "wake"]))
def test_a_ready_unclaimed_block_judged_while_the_clock_ran_ahead_is_withdrawn(
        waited: int, ahead: timedelta, back_after: int, command: str) -> None:
    """A goal ready for its agent's pull for less than its READY_UNCLAIMED
    timeout when the server clock ran hours ahead: the sweeper, on that
    clock, blocked it READY_UNCLAIMED (and a wake fired on the blocked goal).
    The clock set back, the next command on the goal — the sweeper's check,
    the agent's pull, a wake — records the step, which withdraws the block:
    the goal is waiting, ready since the real now, its agent's pull takes it,
    and the READY_UNCLAIMED deadline is judged again from the real time."""
    from ledger.domain import AcquireLease, fold
    from ledger.domain.claims import ClaimWake
    from ledger.domain.events import iso

    state, slot = ready_goal()
    jumped = slot + timedelta(seconds=waited)  # the real time the clock jumped at
    wrong = jumped + ahead
    state = blocked_unclaimed(state, wrong)
    fired = wrong + timedelta(minutes=20)
    state = fold(decision(state, ClaimWake(f"internal:g@{iso(fired)}", "internal", "",
                                           "b" * 64, intended_at=iso(fired)), fired).events,
                 state)
    assert state.status == "blocked"
    now = jumped + min(timedelta(seconds=back_after), ahead - CLOCK_SKEW - timedelta(seconds=1))
    cmd = {"check": CheckLiveness(), "pull": AcquireLease("w", TOKEN),
           "wake": ClaimWake("", "host", "w", "b" * 64)}[command]
    decided = decision(state, cmd, now)
    assert isinstance(decided.events[0].payload, ClockSteppedBack)
    assert fold(decided.events, state) == decided.state  # replays to the same state
    after = decided.state
    assert after.status != "blocked" and after.reason == ""
    if after.lease is not None:  # the pull, or a wake that resumed the goal
        assert after.status == "running" and after.lease.via == command
        return
    assert after.status == "waiting" and after.ready is not None
    assert after.ready.first_at == now
    assert liveness.ready_deadline(after) == now + READY_TIMEOUT
    # The agent's pull takes it, as any ready goal's.
    pulled = decision(after, AcquireLease("w", TOKEN), now + timedelta(minutes=1)).state
    assert pulled.lease is not None and pulled.lease.via == "pull"
    # Unpulled, it is judged again at the real time: not before its timeout.
    assert decision(after, CheckLiveness(), now + READY_TIMEOUT - timedelta(seconds=1)) \
        .state.status == "waiting"
    blocked_unclaimed(after, now + READY_TIMEOUT)


def test_a_ready_unclaimed_block_judged_on_the_real_clock_stays() -> None:
    """Blocked at its real deadline; then the clock ran ahead (a wake fired on
    the blocked goal at that time) and was set back: the step is recorded,
    the block stays — a person must act, as before."""
    from ledger.domain import AcquireLease, fold
    from ledger.domain.claims import ClaimWake
    from ledger.domain.errors import DomainError
    from ledger.domain.events import iso

    state, slot = ready_goal()
    deadline = slot + READY_TIMEOUT
    state = blocked_unclaimed(state, deadline)
    assert decision(state, CheckLiveness(), deadline + timedelta(hours=9)).events == []
    wrong = deadline + timedelta(hours=8)
    state = fold(decision(state, ClaimWake(f"internal:g@{iso(wrong)}", "internal", "",
                                           "b" * 64, intended_at=iso(wrong)), wrong).events,
                 state)
    now = deadline + timedelta(minutes=5)
    decided = decision(state, CheckLiveness(), now)
    assert isinstance(decided.events[0].payload, ClockSteppedBack)
    assert (decided.state.status, decided.state.reason) == ("blocked", "READY_UNCLAIMED")
    assert decided.state.ready is None
    try:
        decision(decided.state, AcquireLease("w", TOKEN), now)
    except DomainError:
        pass
    else:
        raise AssertionError("a blocked goal's lease was granted")
