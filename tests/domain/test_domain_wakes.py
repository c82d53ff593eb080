"""Watchdogs, claims, receipts, jobs and verified completion in the pure domain."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from ledger.domain import (
    DomainError,
    Finish,
    GoalState,
    RecordCheckpoint,
    RunGoal,
    StartGoal,
    decide,
    fold,
    iso,
)
from ledger.domain.claims import ClaimWake, claim_outcome
from ledger.domain.finishing import completion_state
from ledger.domain.jobs import TrackJob, UpdateJob
from ledger.domain.kinds import (
    CONTINUATION_DISPATCHED,
    GOAL_RECOVERED,
    RECEIPT_RECORDED,
    WAKE_CLAIMED,
)
from ledger.domain.overdue import CheckLiveness
from ledger.domain.watchdogs import CancelWatchdog, PrepareWatchdog, RecordReceipt, watchdog_health
from tests.factories import completed, proof_of

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
TOKEN, TOKEN_2, TOKEN_3, REF = "1" * 64, "2" * 64, "3" * 64, "f" * 64
HOUR = 3600
# What a terminal goal may still record: a late wake's answer
# (terminal_noop / terminal_cleanup_required), the watchdog's cancellation
# receipt, a dispatch's outcome (its continuation may have finished the goal
# first) and an operator's recovery of a failed/AUTH_FAILED goal. Nothing else.
TERMINAL_ALLOWED_KINDS = frozenset({WAKE_CLAIMED, RECEIPT_RECORDED, GOAL_RECOVERED,
                                    CONTINUATION_DISPATCHED})


def at(**delta) -> datetime:
    return T0 + timedelta(**delta)


def apply(state: GoalState, command, when: datetime = T0) -> GoalState:
    return fold(decide(state, command, when), state)


def kinds(state: GoalState, command, when: datetime = T0) -> list[str]:
    return [e.kind for e in decide(state, command, when)]


def goal(scheduler: str = "internal", **policy) -> GoalState:
    start = StartGoal(goal_id="g-1", workspace="/w", goal_key="k", objective="o",
                      agent="agent-1", policy={"scheduler": scheduler, **policy})
    return apply(GoalState(), RunGoal(start, "agent-1", TOKEN))


def prepared(scheduler: str = "internal", **policy) -> GoalState:
    state = goal(scheduler, **policy)
    return apply(state, PrepareWatchdog(proof_of(state), HOUR, "Europe/Istanbul", "wd-g-1"))


def live_host(**policy) -> GoalState:
    state = prepared("host", **policy)
    return apply(state, RecordReceipt(proof_of(state), "created", REF, "2026-12-02T10:00:00Z"))


def wake(occurrence: str = "occ-1", source: str = "internal", token: str = TOKEN_2,
         push: bool = True):
    """An internal wake with a push dispatcher by default: it grants the lease
    itself (pull wakes are tested on their own)."""
    return ClaimWake(occurrence, source, "agent-1", token, push=push and source == "internal")


def vanished(state: GoalState) -> GoalState:
    """The holder stops; past expiry + grace the sweeper expires its lease."""
    return apply(state, CheckLiveness(), at(minutes=12))


# ------------------------------------------------------------------ watchdog


def test_internal_watchdog_is_prepared_once_with_its_receipt():
    state = goal()
    command = PrepareWatchdog(proof_of(state), HOUR, "UTC", "wd-g-1")
    assert kinds(state, command) == ["wake.scheduled", "receipt.recorded"]
    state = apply(state, command)
    assert state.watchdog.status == "live"
    assert iso(state.watchdog.next_due_at) == "2026-12-02T10:00:00.000000Z"
    # One watchdog per goal: preparing again never creates a second one or retimes it.
    assert decide(state, PrepareWatchdog(proof_of(state), 60, "UTC", "other"), at(minutes=5)) == []


def test_host_watchdog_waits_for_its_receipt():
    state = prepared("host")
    assert state.watchdog.status == "requested"
    assert state.watchdog.tzid == "Europe/Istanbul"
    created = apply(state, RecordReceipt(proof_of(state), "created", REF,
                                         "2026-12-02T13:00:00+03:00", "local"))
    assert created.watchdog.status == "live"
    assert iso(created.watchdog.next_due_at) == "2026-12-02T10:00:00.000000Z"
    assert watchdog_health(created) == "ok"


def test_cloud_only_when_the_host_proved_it():
    state = prepared("host")
    with pytest.raises(DomainError) as error:
        decide(state, RecordReceipt(proof_of(state), "created", REF, "2026-12-02T10:00:00Z",
                                    "cloud"), T0)
    assert error.value.field == "runs_on"
    ok = apply(state, RecordReceipt(proof_of(state), "created", REF, "2026-12-02T10:00:00Z",
                                    "cloud", verified=True))
    assert ok.watchdog.runs_on == "cloud"


def test_a_definitive_create_failure_allows_exactly_one_retry():
    state = prepared("host")
    failed = apply(state, RecordReceipt(proof_of(state), "create_failed"))
    assert failed.watchdog.status == "create_failed"
    assert watchdog_health(failed) == "degraded"
    assert failed.status == "running"  # degradation never blocks the goal
    retry = PrepareWatchdog(proof_of(state), HOUR, "UTC")
    assert kinds(failed, retry) == ["wake.scheduled"]
    again = apply(failed, retry)
    assert again.watchdog.attempt == 2
    second = apply(again, RecordReceipt(proof_of(state), "create_failed"))
    assert second.watchdog.status == "failed"
    assert decide(second, retry, T0) == []  # no third create


def test_an_uncertain_create_is_never_followed_by_a_blind_second_create():
    state = prepared("host")
    uncertain = apply(state, RecordReceipt(proof_of(state), "create_uncertain"))
    assert decide(uncertain, PrepareWatchdog(proof_of(state), HOUR, "UTC"), T0) == []
    assert claim_outcome(uncertain, wake(source="host"), at(hours=1))["outcome"] == \
        "receipt_required"
    assert decide(uncertain, wake(source="host"), at(hours=1)) == []  # mutate nothing
    reconciled = apply(uncertain, RecordReceipt(proof_of(state), "created", REF,
                                                "2026-12-02T10:00:00Z"))
    assert reconciled.watchdog.status == "live"


def test_user_attested_deletion_needs_who_attested():
    state = live_host()
    with pytest.raises(DomainError):
        decide(state, RecordReceipt(proof_of(state), "user_attested_deleted"), T0)
    gone = apply(state, RecordReceipt(proof_of(state), "user_attested_deleted",
                                      attested_by="alice (operator)"))
    assert gone.watchdog.status == "cancelled"


def test_internal_watchdogs_take_no_host_receipts():
    state = prepared()
    with pytest.raises(DomainError):
        decide(state, RecordReceipt(proof_of(state), "cancelled"), T0)


def test_cancel_internal_records_the_receipt_host_asks_for_cleanup():
    internal = prepared()
    assert kinds(internal, CancelWatchdog(proof_of(internal))) == ["receipt.recorded"]
    host = live_host()
    cancel = apply(host, CancelWatchdog(proof_of(host)))
    assert cancel.watchdog.status == "cancel_requested"
    done = apply(cancel, RecordReceipt(proof_of(host), "cancelled"))
    assert done.watchdog.status == "cancelled"


# ------------------------------------------------------------------ claims


def test_recurring_acquired_after_the_holder_vanished():
    state = vanished(prepared())
    assert state.status == "waiting" and state.lease_end == "expired"
    events = decide(state, wake(), at(hours=1))
    assert [e.kind for e in events] == ["wake.claimed", "continuation.charged",
                                        "lease.acquired"]
    assert events[1].data == {"attempt": 1, "max": 3, "occurrence_id": "occ-1"}
    claim = events[0].data
    assert claim["outcome"] == "recurring_acquired"
    assert claim["reason"] == "timeout_recovery"
    assert claim["retry_count"] == 1
    after = fold(events, state)
    assert after.lease.generation == 2 and after.lease.token_sha256 == TOKEN_2
    assert iso(after.watchdog.next_due_at) == "2026-12-02T11:00:00.000000Z"


def test_a_stale_lease_is_taken_over_by_the_wake_itself():
    state = prepared()
    events = decide(state, wake(), at(hours=1))
    assert [e.kind for e in events] == ["wake.claimed", "continuation.charged",
                                        "lease.taken_over"]


def test_the_same_occurrence_twice_is_already_claimed_and_changes_nothing():
    state = apply(vanished(prepared()), wake("occ-9"), at(hours=1))
    assert claim_outcome(state, wake("occ-9", token=TOKEN_3), at(hours=1))["outcome"] == \
        "already_claimed"
    assert decide(state, wake("occ-9", token=TOKEN_3), at(hours=1)) == []


def test_a_live_worker_makes_the_wake_a_noop():
    state = prepared()
    answer = claim_outcome(state, wake(), at(hours=1) - timedelta(minutes=55))
    assert answer["outcome"] == "not_due"  # early: due at 10:00
    answer = claim_outcome(state, wake(), at(minutes=9))
    assert answer["outcome"] in ("not_due",)
    busy = apply(state, RecordCheckpoint(current_step="s", progress_pct=1,
                                         proof=proof_of(state)), at(minutes=59, seconds=30))
    beat = fold(decide(busy, _heartbeat(busy), at(minutes=59, seconds=40)), busy)
    answer = claim_outcome(beat, wake(), at(hours=1))
    assert answer["outcome"] == "worker_busy_noop"
    assert answer["retry_after_seconds"] > 60
    assert [e.data["outcome"] for e in decide(beat, wake(), at(hours=1))] == \
        ["worker_busy_noop"]


def _heartbeat(state):
    from ledger.domain import Heartbeat

    return Heartbeat(proof_of(state))


def test_in_the_stale_grace_only_seconds_remain():
    state = prepared(lease_seconds=600)
    answer = claim_outcome(state, wake(), at(minutes=10, seconds=30))
    assert answer["outcome"] in ("not_due", "worker_busy_noop")
    state = apply(state, _heartbeat(state), at(minutes=50))  # expires 10:00
    answer = claim_outcome(state, wake(), at(hours=1, seconds=20))
    assert answer["outcome"] == "worker_busy_noop" and answer["retry_after_seconds"] == 40


def test_terminal_goal_with_a_live_watchdog_needs_cleanup():
    host = live_host()
    events = decide(host, completed(host, "merged"), T0)
    # The request carries the evidence; the completion the receipt lets through records it.
    requested = next(e for e in events if e.kind == "goal.finish_requested")
    assert requested.data["evidence"] == [{"criterion": c, "evidence": f"checked: {c}"}
                                          for c in host.done_criteria]
    finished = fold(events, host)
    assert completion_state(finished) == "pending_native_cleanup"
    cleanup = decide(finished, RecordReceipt(proof_of(host), "cancelled"), T0)
    assert cleanup[-1].kind == "goal.completed"
    assert cleanup[-1].data["evidence"] == requested.data["evidence"]
    ended = fold(cleanup, finished)
    assert ended.status == "done"
    noop = decide(ended, wake(source="host"), at(hours=2))
    assert [e.data["outcome"] for e in noop] == ["terminal_noop"]
    assert {e.kind for e in noop} <= TERMINAL_ALLOWED_KINDS


def test_an_internal_watchdog_that_outlived_its_goal_is_cancelled_by_the_claim():
    state = prepared()
    # A blocked goal never resumes by a wake; its watchdog is cancelled.
    blocked = apply(state, Finish("blocked", proof=proof_of(state)))
    assert blocked.watchdog.status == "cancelled"  # finish cancelled it already
    # Had it survived (e.g. an old release), the claim cancels it:
    stale = blocked.but(watchdog=replace(blocked.watchdog, status="live"))
    events = decide(stale, wake(), at(hours=1))
    assert [e.kind for e in events] == ["wake.claimed", "receipt.recorded"]
    assert events[0].data["outcome"] == "terminal_cleanup_required"
    assert events[1].data["status"] == "cancelled"


def test_no_wake_loops_past_max_wake_retries():
    state = vanished(prepared(max_wake_retries=2))
    for n in range(1, 3):
        state = apply(state, wake(f"occ-{n}", token=f"{n}" * 64), at(hours=n))
        assert state.retry_count == n
        # The continuation shows a sign of life but never checkpoints.
        state = apply(state, _heartbeat(state), at(hours=n, minutes=1))
        state = apply(state, CheckLiveness(), at(hours=n, minutes=13))
        assert state.status == "waiting"
    events = decide(state, wake("occ-3", token="9" * 64), at(hours=3))
    assert [e.kind for e in events] == ["wake.claimed", "goal.blocked", "receipt.recorded"]
    after = fold(events, state)
    assert after.continuations_used == 2
    assert (after.status, after.reason) == ("blocked", "WAKE_RETRIES_EXHAUSTED")
    assert after.watchdog.status == "cancelled"


def test_a_checkpoint_resets_the_wake_loop_counter():
    state = apply(vanished(prepared()), wake(), at(hours=1))
    assert state.retry_count == 1
    state = apply(state, RecordCheckpoint(current_step="x", progress_pct=1,
                                          proof=proof_of(state)), at(hours=1, minutes=1))
    assert state.retry_count == 0


def test_host_claims_require_a_confirmed_watchdog():
    state = prepared("host")
    assert claim_outcome(state, wake(source="host"), at(hours=1))["outcome"] == \
        "receipt_required"


# ------------------------------------------------------------------ sweeper


def test_the_sweeper_expires_only_after_the_grace():
    state = goal()
    assert decide(state, CheckLiveness(), at(minutes=10, seconds=59)) == []
    events = decide(state, CheckLiveness(), at(minutes=11))
    # Liveness: a crashed holder's goal gets a timeout_recovery wake due at
    # once (minutes, not the next hourly slot), not only its watchdog.
    assert [e.kind for e in events] == ["lease.expired", "wake.scheduled"]
    assert events[1].data == {"kind": "requested", "due_at": "2026-12-02T09:11:00.000000Z",
                              "reason": "timeout_recovery", "requested_by": "liveness",
                              "schedule_name": "wakeledger-wake-g-1"}
    after = fold(events, state)
    assert after.status == "waiting" and after.requested_wake.reason == "timeout_recovery"
    # The wake fires: the goal is ready, and its recovery is charged when pulled.
    fired = apply(after, ClaimWake("internal:g-1@requested", "internal", "agent-1", TOKEN_2,
                                   kind="requested"), at(minutes=11, seconds=20))
    assert fired.ready.reason == "timeout_recovery" and fired.ready.charge is True
    assert fired.watchdog.status == "live"  # and it keeps its recurring watchdog from now on


# ------------------------------------------------------------------ jobs


def test_a_running_job_blocks_finish_but_never_keeps_a_silent_holder_alive():
    state = goal()
    state = apply(state, TrackJob(proof_of(state), "job-1", "ci_run", "gh-run-123"))
    assert decide(state, TrackJob(proof_of(state), "job-2", "ci_run", "gh-run-123"), T0) == []
    # Within the lease and its grace the holder is trusted; after it, a dead
    # holder must not lock the goal behind its CI run.
    assert decide(state, CheckLiveness(), at(minutes=10, seconds=59)) == []
    assert kinds(state, CheckLiveness(), at(hours=1))[:1] == ["lease.expired"]
    assert claim_outcome(state, wake(), at(minutes=5))["outcome"] == "worker_busy_noop"
    with pytest.raises(DomainError) as error:
        decide(state, completed(state), T0)
    assert error.value.code == "jobs_running"
    done = apply(state, UpdateJob(proof_of(state), "job-1", "succeeded", "green"))
    assert done.jobs[0]["status"] == "succeeded"
    with pytest.raises(DomainError) as error:
        decide(done, UpdateJob(proof_of(state), "job-1", "failed"), T0)
    assert error.value.code == "job_terminal"
    assert kinds(done, completed(state)) == ["goal.completed"]


def test_finish_cancels_an_internal_watchdog_in_the_same_command():
    state = prepared()
    events = decide(state, completed(state), T0)
    assert [e.kind for e in events] == ["receipt.recorded", "goal.completed"]
    assert completion_state(fold(events, state)) == "completed"


def test_finish_with_a_live_host_watchdog_is_pending_until_the_receipt():
    state = live_host()
    events = decide(state, Finish("failed", "gave up", proof_of(state)), T0)
    assert [e.kind for e in events] == ["goal.finish_requested", "wake.cancel_requested"]
    pending = fold(events, state)
    assert pending.status == "running" and pending.reason == "PENDING_NATIVE_CLEANUP"
    assert completion_state(pending) == "pending_native_cleanup"
    # A second finish while still pending records nothing new.
    assert decide(pending, Finish("failed", "gave up", proof_of(state)), T0) == []
    ended = apply(pending, RecordReceipt(proof_of(state), "cancelled"))
    assert (ended.status, completion_state(ended)) == ("failed", "failed")
