"""Progress is evidence, not activity (docs/liveness.md, "What counts as
progress"): property tests of the progress rule in the pure domain
(hypothesis). An agent that releases and retakes its lease, repeats its
checkpoint, or tracks and ends dummy jobs is listed NO_PROGRESS by the
deadline it had without any of it; its wakes stop after a bounded number of
empty turns; a backlog of queued fires counts once; a pause to a reset days
away is listed for a person; the counts an agent chooses are capped."""

import hashlib
import json
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.domain import (
    AcquireLease,
    DomainError,
    GoalState,
    Heartbeat,
    LeaseProof,
    RecordCheckpoint,
    ReleaseLease,
    RunGoal,
    StartGoal,
    decide,
    decision,
    fold,
    iso,
    liveness,
    progress,
)
from ledger.domain.claims import ClaimWake
from ledger.domain.commands import Artifact
from ledger.domain.failures import RATE_LIMIT
from ledger.domain.jobs import TrackJob, UpdateJob
from ledger.domain.kinds import CheckpointRecorded
from ledger.domain.overdue import CheckLiveness, check
from ledger.domain.policy import DEFAULT_CAPS, OVER_CAP, policy
from ledger.domain.runs import Recover, ReportRun
from ledger.domain.watchdogs import PrepareWatchdog

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TOKEN = "a" * 64
HOUR = timedelta(hours=1)
# An hourly goal's progress window without a lease: 1.5 intervals + 60 min.
WINDOW = 1.5 * HOUR + timedelta(minutes=60)


def running(**goal_policy) -> GoalState:
    start = StartGoal(goal_id="g", workspace="/w", goal_key="k", objective="o",
                      next_actions=("work",), policy={"lease_seconds": 300, **goal_policy})
    return fold(decide(GoalState(), RunGoal(start, holder="w", token_sha256=TOKEN), T0))


def proof(state: GoalState) -> LeaseProof:
    return LeaseProof(TOKEN, state.lease.generation)


def step(state: GoalState, command, at: datetime) -> GoalState:
    return decision(state, command, at).state


def swept(state: GoalState, at: datetime) -> GoalState:
    return fold(check(state, CheckLiveness(), at), state)


def same_checkpoint(state: GoalState, **extra) -> RecordCheckpoint:
    """What is recorded already, said again (the narration may vary)."""
    return RecordCheckpoint(current_step=state.current_step, progress_pct=state.progress_pct,
                            next_actions=tuple(state.next_actions), proof=proof(state), **extra)


# ------------------------------------------------------------------ what counts


changes = st.sampled_from(["step", "pct", "next_actions", "artifact", "new_artifact"])
narration = st.sampled_from(["note", "completed", "errors", "nothing"])


@settings(max_examples=60, deadline=None)
@given(changes)
def test_a_checkpoint_that_changes_what_is_recorded_is_progress(change):
    state = running()
    state = step(state, RecordCheckpoint(
        current_step="build", progress_pct=10, next_actions=("test",),
        artifacts=(Artifact("out.bin", "1" * 64, 3),), proof=proof(state)), T0)
    at = T0 + timedelta(minutes=30)
    fields = {"current_step": "build", "progress_pct": 10, "next_actions": ("test",),
              "artifacts": (Artifact("out.bin", "1" * 64, 3),)}
    if change == "step":
        fields["current_step"] = "link"
    elif change == "pct":
        fields["progress_pct"] = 11
    elif change == "next_actions":
        fields["next_actions"] = ("test", "ship")
    elif change == "artifact":
        fields["artifacts"] = (Artifact("out.bin", "2" * 64, 3, previous_sha256="1" * 64),)
    else:
        fields["artifacts"] = (Artifact("log.txt", "3" * 64, 9),)
    after = step(state, RecordCheckpoint(**fields, proof=proof(state)), at)
    assert after.progress_since == at
    assert after.since_progress == {}


@settings(max_examples=60, deadline=None)
@given(narration, st.integers(1, 300))
def test_a_checkpoint_that_records_the_same_again_is_not_progress(told, minutes):
    state = running()
    before = liveness.progress_expectation(state).deadline
    extra = {"note": {"note": "still on it"}, "completed": {"completed": ("looked again",)},
             "errors": {"errors": ("flaky",)}, "nothing": {}}[told]
    at = T0 + timedelta(minutes=minutes % 59 + 1)
    after = step(state, same_checkpoint(state, **extra), at)
    assert after.progress_since == state.progress_since
    assert after.since_progress == {progress.LEASES: 1, progress.CHECKPOINTS: 1}
    assert liveness.progress_expectation(after).deadline == before
    assert after.checkpoints == state.checkpoints + 1  # recorded, all the same


@settings(max_examples=40, deadline=None)
@given(st.integers(2, progress.RECENT), st.integers(1, 5), st.booleans())
def test_a_loop_through_a_few_checkpoints_is_not_progress(length, rounds, with_artifacts):
    """An agent that says A, B, A, B… (or loops through up to ``RECENT``
    checkpoints) moves once through the loop; after that it is looping: the
    progress clock stays where the loop's first pass ended, every repeat is
    counted, and the next new checkpoint is progress again."""
    state = running()
    at = T0

    def said(i: int) -> RecordCheckpoint:
        recorded = state.artifact("out.bin")
        previous = recorded["sha256"] if recorded else None
        artifacts = ((Artifact("out.bin", f"{i:x}" * 64, 3, previous_sha256=previous),)
                     if with_artifacts else ())
        return RecordCheckpoint(current_step=f"step {i}", progress_pct=10, next_actions=("go",),
                                artifacts=artifacts, proof=proof(state))

    for i in range(length):
        at += timedelta(minutes=2)
        state = step(state, said(i), at)
        assert state.progress_since == at
    looped_since = state.progress_since
    for _ in range(rounds):
        for i in range(length):
            at += timedelta(minutes=2)
            state = step(state, said(i), at)
    assert state.progress_since == looped_since
    assert state.since_progress[progress.CHECKPOINTS] == rounds * length
    assert len(state.recent_progress) <= progress.RECENT
    at += timedelta(minutes=2)
    state = step(state, RecordCheckpoint(current_step="something new", progress_pct=20,
                                         next_actions=("go",), proof=proof(state)), at)
    assert state.progress_since == at and state.since_progress == {}


# ------------------------------------------------------------------ activity never hides a goal


activity = st.sampled_from(["heartbeat", "churn", "same_checkpoint", "release_and_wait"])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(activity, st.integers(20, 280)), min_size=1, max_size=60))
def test_no_activity_keeps_a_goal_unlisted_past_its_unleased_deadline(history):
    """Whatever mix of heartbeats, lease churn, identical checkpoints and
    releases an agent makes, it is listed NO_PROGRESS by the deadline its
    goal had without a lease (the lease's grant never extends it), with the
    counts it went through."""
    state = running()
    bound = T0 + WINDOW
    at, grants, repeats = T0, 1, 0
    for kind, seconds in history:
        at += timedelta(seconds=seconds)
        if state.lease and kind == "heartbeat":
            state = step(state, Heartbeat(proof(state)), at)
        elif state.lease and kind == "same_checkpoint":
            state = step(state, same_checkpoint(state), at)
            repeats += 1
        elif state.lease and kind in ("churn", "release_and_wait"):
            state = step(state, ReleaseLease(proof(state)), at)
            if kind == "churn":
                state = step(state, AcquireLease("w", TOKEN), at + timedelta(seconds=5))
                grants += 1
        elif not state.lease:
            state = step(state, AcquireLease("w", TOKEN), at)
            grants += 1
        deadline = liveness.progress_expectation(state)
        if deadline is not None:
            assert deadline.deadline <= bound
        state = swept(state, at)
        if at >= bound:
            break
    if at < bound:  # the agent goes on the same way (heartbeats) until the deadline
        at = bound
        if state.lease:
            state = step(state, Heartbeat(proof(state)), at - timedelta(seconds=1))
        state = swept(state, at)
    assert liveness.attention(state) == liveness.NO_PROGRESS
    said = state.liveness_alert.since_progress
    assert said[progress.LEASES] == grants and said[progress.CHECKPOINTS] == repeats


def test_a_churning_holder_is_listed_with_its_lease_grants():
    """Release and retake the lease every 50 s, never a checkpoint: each grant
    once restarted the clock, so the goal was never listed."""
    state = running()
    at = T0
    while not state.liveness_alert:
        at += timedelta(seconds=50)
        state = step(state, ReleaseLease(proof(state)), at)
        state = step(state, AcquireLease("w", TOKEN), at + timedelta(seconds=1))
        state = swept(state, at + timedelta(seconds=2))
        assert at < T0 + WINDOW + timedelta(minutes=2)
    assert state.liveness_alert.reason == liveness.NO_PROGRESS
    counts = state.liveness_alert.since_progress
    assert counts[progress.LEASES] > 100 and counts[progress.EMPTY_TURNS] > 100
    assert "lease grant" in state.liveness_alert.detail


@settings(max_examples=40, deadline=None)
@given(st.integers(5, 170), st.integers(2, 12))
def test_dummy_jobs_are_credited_once(job_minutes, jobs):
    """A holder that tracks a job and reports it done, over and over, with no
    checkpoint: the first wait on a job is not a lack of progress, the
    later ones are."""
    state = running(job_deadline_minutes=360)
    at = T0
    first_end = None
    for n in range(jobs):
        state = step(state, TrackJob(proof(state), job_id=f"j{n}", kind="ci", ref=f"r{n}"), at)
        at += timedelta(minutes=job_minutes)
        state = step(state, Heartbeat(proof(state)), at - timedelta(minutes=1))
        state = step(state, UpdateJob(proof(state), f"j{n}", "succeeded"), at)
        first_end = first_end or at
        state = swept(state, at)
        # Its heartbeats keep the lease; the progress clock ran from the first job's end.
        window = min(timedelta(minutes=60), WINDOW)
        if at >= first_end + window + timedelta(minutes=1):
            assert liveness.attention(state) == liveness.NO_PROGRESS, (n, at)
            assert state.liveness_alert.since_progress[progress.JOBS] >= 2
            return
        for k in range(1, 5):  # heartbeats through the next job
            state = step(state, Heartbeat(proof(state)), at + timedelta(seconds=k))


def test_a_long_first_job_wait_is_not_a_lack_of_progress():
    state = running(job_deadline_minutes=360)
    state = step(state, TrackJob(proof(state), job_id="ci", kind="ci", ref="r"), T0)
    at = T0
    for _ in range(5 * 12):  # five hours of heartbeats while CI runs
        at += timedelta(minutes=5)
        state = swept(step(state, Heartbeat(proof(state)), at), at)
    assert liveness.attention(state) == ""
    state = step(state, UpdateJob(proof(state), "ci", "succeeded"), at)
    assert liveness.progress_expectation(state).deadline == at + timedelta(minutes=60)


# ------------------------------------------------------------------ empty loops stop waking


def pulled_goal(max_wake_retries: int) -> GoalState:
    state = running(max_wake_retries=max_wake_retries)
    state = step(state, PrepareWatchdog(proof(state)), T0)
    return state


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 6))
def test_an_identical_checkpoint_loop_stops_waking_after_its_empty_turns(limit):
    """At each wake the agent pulls, records the same step and releases: each
    turn is empty, and after ``max_wake_retries`` the wake is not dispatched
    (blocked, a person told) instead of resuming the loop forever."""
    state = pulled_goal(limit)
    state = step(state, same_checkpoint(state, release_lease=True), T0 + timedelta(minutes=5))
    granted = 0
    for n in range(1, limit + 3):
        slot = T0 + n * HOUR
        wake = ClaimWake(f"internal:g@{iso(slot)}", "internal", "", "b" * 64,
                         intended_at=iso(slot))
        events = decide(state, wake, slot)
        state = fold(events, state)
        outcome = events[0].data["outcome"]
        if outcome == "terminal_cleanup_required":
            assert (state.status, state.reason) == ("blocked", "WAKE_RETRIES_EXHAUSTED")
            break
        assert outcome == "ready_for_pull"
        granted += 1
        state = step(state, AcquireLease("w", TOKEN), slot + timedelta(minutes=1))
        state = step(state, same_checkpoint(state, release_lease=True),
                     slot + timedelta(minutes=3))
    assert granted == limit
    assert state.status == "blocked"


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 12), st.sampled_from([60, 120, 300]))
def test_a_backlog_of_queued_fires_is_one_claim(queued, cadence_seconds):
    """Workers stalled while the scheduler queued a fire per slot; the cluster
    then runs them all within seconds. One claim stands for them: no retries
    used, the goal neither blocked nor its watchdog cancelled."""
    state = running(cadence_minutes=1)
    state = step(state, PrepareWatchdog(proof(state), interval_seconds=cadence_seconds), T0)
    state = step(state, RecordCheckpoint(current_step="s1", progress_pct=1, release_lease=True,
                                         proof=proof(state)), T0 + timedelta(seconds=30))
    first = state.watchdog.next_due_at
    every = timedelta(seconds=cadence_seconds)
    now = first + queued * every  # the hang ends
    recorded = []
    for k in range(queued):
        slot = first + k * every
        events = decide(state, ClaimWake(f"internal:g@{iso(slot)}", "internal", "",
                                         "b" * 64, intended_at=iso(slot)),
                        now + timedelta(milliseconds=200 * k))
        recorded += [e for e in events if e.kind == "wake.claimed"]
        state = fold(events, state)
    assert len(recorded) == 1 and recorded[0].data["outcome"] == "ready_for_pull"
    assert state.retry_count == 1
    assert state.status == "waiting" and state.watchdog.status == "live"
    # The slot after the hang is a wake of its own.
    nxt = state.watchdog.next_due_at
    events = decide(state, ClaimWake(f"internal:g@{iso(nxt)}", "internal", "",
                                     "b" * 64, intended_at=iso(nxt)), nxt)
    assert events and events[0].data["outcome"] == "ready_for_pull"


# ------------------------------------------------------------------ a pause days away


@settings(max_examples=40, deadline=None)
@given(st.integers(10, 7 * 24 * 60), st.integers(60, 3 * 1440))
def test_a_pause_to_a_reset_days_away_is_listed_for_a_person(reset_minutes, long_pause):
    state = running(long_pause_minutes=long_pause, max_continuations=10)
    reset = T0 + timedelta(minutes=reset_minutes)
    state = step(state, ReportRun(proof(state), "error", RATE_LIMIT, reset_at=reset), T0)
    assert state.status == "paused"
    listed_at = T0 + timedelta(minutes=long_pause)
    until = state.paused_until
    before = swept(state, listed_at - timedelta(seconds=1))
    assert liveness.attention(before) == ""
    if until <= listed_at:
        assert liveness.pause_expectation(state) is None
        return
    assert liveness.deadline_at(state) <= listed_at
    after = swept(state, listed_at)
    assert liveness.attention(after) == "LONG_PAUSE"
    assert after.liveness_alert.paused_until == state.paused_until
    # A person chooses to wait: recovered, it stays paused and is asked again later.
    waited = step(after, Recover("op", "wait for it"), listed_at + timedelta(minutes=5))
    assert waited.status == "paused" and liveness.attention(waited) == ""
    assert liveness.pause_expectation(waited) is None or \
        liveness.pause_expectation(waited).deadline == \
        listed_at + timedelta(minutes=5 + long_pause)


# ------------------------------------------------------------------ caps on counts


@given(st.sampled_from(["max_continuations", "max_wake_retries"]), st.integers(0, 100),
       st.integers(5, 100))
def test_a_count_over_its_cap_is_refused(name, value, cap):
    caps = {**DEFAULT_CAPS, name: cap}
    try:
        result = policy({name: value}, caps=caps)
    except DomainError as refused:
        assert refused.code == OVER_CAP and value > cap
        assert refused.extra["cap_name"] == name
        return
    assert result[name] == value <= cap


def test_the_default_caps_refuse_a_hundred_continuations():
    for name in ("max_continuations", "max_wake_retries"):
        try:
            policy({name: 100}, caps=DEFAULT_CAPS)
        except DomainError as refused:
            assert refused.code == OVER_CAP
        else:
            raise AssertionError(f"{name}: 100 was accepted")


_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)


@given(step=_TEXT, pct=st.integers(0, 100), actions=st.lists(_TEXT, max_size=4),
       artifacts=st.dictionaries(_TEXT, st.text("0123456789abcdef", min_size=64,
                                                max_size=64), max_size=3))
def test_a_fingerprint_is_the_digest_of_what_the_checkpoint_says_as_json(step, pct, actions,
                                                                          artifacts):
    """The fingerprints are stored, so their text never changes: the JSON of
    the step, percent, next actions and sorted artifact checksums, whatever
    the characters (quotes, backslashes, control characters, any script)."""
    data = CheckpointRecorded(
        current_step=step, progress_pct=pct, completed=[], next_actions=actions,
        artifacts=[{"path": path, "sha256": digest, "bytes": 1}
                   for path, digest in artifacts.items()],
        errors=[], note="", generation=1)
    said = json.dumps([step, pct, actions, sorted(artifacts.items())], separators=(",", ":"),
                      ensure_ascii=False)
    assert progress.fingerprint(data) == hashlib.sha256(said.encode()).hexdigest()[:16]
