"""Event kinds (``family.past_tense``), one payload class per kind, and the
event value the decider emits.

A stored kind never changes meaning and its data never changes shape without
an upcaster (``ledger.domain.upcasters``): old events are replayed forever.
Each kind's data is a frozen dataclass registered with its kind; how it is
stored (which keys, which ones only when set) is said by its fields and
applied in one place, ``ledger.domain.codec``.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ledger.domain.codec import Payload, decode, encode, event_kind, optional, stored_as

GOAL_STARTED = "goal.started"
GOAL_FINISH_REQUESTED = "goal.finish_requested"
GOAL_PAUSED = "goal.paused"
GOAL_STOPPED = "goal.stopped"
GOAL_RECOVERED = "goal.recovered"
RUN_REPORTED = "run.reported"
CONTINUATION_CHARGED = "continuation.charged"
APPROVAL_REQUESTED = "approval.requested"
APPROVAL_RESOLVED = "approval.resolved"
WORKSPACE_BOUND = "workspace.bound"
WORKSPACE_RELEASED = "workspace.released"
LEASE_ACQUIRED = "lease.acquired"
LEASE_TAKEN_OVER = "lease.taken_over"
LEASE_RENEWED = "lease.renewed"
LEASE_RELEASED = "lease.released"
LEASE_EXPIRED = "lease.expired"
GOAL_COMPLETED = "goal.completed"
GOAL_FAILED = "goal.failed"
GOAL_BLOCKED = "goal.blocked"
CHECKPOINT_RECORDED = "checkpoint.recorded"

WAKE_SCHEDULED = "wake.scheduled"
WAKE_CANCEL_REQUESTED = "wake.cancel_requested"
CONTINUATION_DISPATCHED = "continuation.dispatched"
JOB_TRACKED = "job.tracked"
JOB_UPDATED = "job.updated"
# A deadline passed without its evidence (docs/design.md, "Wakes and claims"): HOST_SILENT or
# JOB_SILENT, with what was expected and by when.
LIVENESS_MISSED = "liveness.missed"
# The clock was found behind the goal's last event by more than the skew
# bound (a server clock that ran ahead and was set back): the goal's stamps
# from the future were brought back to now (ledger.domain.clocksteps).
CLOCK_STEPPED_BACK = "clock.stepped_back"

# A host continued the goal's session by itself (Claude Code's "continue
# automatically at usage limit", an OpenClaw run): one continuation of its
# reset, charged once; and a continuation that found the reset continued
# already, which stands down (docs/agents.md, "One continuation per reset").
CONTINUATION_HOST_MADE = "continuation.host_made"
CONTINUATION_STOOD_DOWN = "continuation.stood_down"

# Kinds that may still be appended to a terminal goal: a late wake is answered
# (terminal_noop / terminal_cleanup_required, docs/design.md, "Wakes and claims"), the
# watchdog's cancellation receipt is recorded, and an operator may recover a
# failed/AUTH_FAILED goal (the operators' rule). Nothing else.
WAKE_CLAIMED = "wake.claimed"
RECEIPT_RECORDED = "receipt.recorded"
# A dispatch's outcome is recorded even when the continuation it started
# finished the goal first (found by the soak: the record was refused).
TERMINAL_ALLOWED_KINDS = frozenset({WAKE_CLAIMED, RECEIPT_RECORDED, GOAL_RECOVERED,
                                    CONTINUATION_DISPATCHED})


@dataclass(frozen=True, slots=True)
class Event:
    """What the decider emits: a typed payload (its class says the kind) and
    when it happened."""

    payload: Payload
    at: datetime

    @property
    def kind(self) -> str:
        return self.payload.KIND

    @property
    def data(self) -> dict[str, Any]:
        """The payload as stored and hashed (``codec.encode``)."""
        return encode(self.payload)

    @property
    def family(self) -> str:
        return self.kind.partition(".")[0]

    @classmethod
    def stored(cls, kind: str, data: Mapping[str, Any], at: datetime) -> "Event":
        """An event read back from its stored kind and data (``codec.decode``)."""
        return cls(decode(kind, data), at)


def iso(moment: datetime) -> str:
    """UTC, microseconds, always the same shape: it is hashed into the chain."""
    last = _last_iso
    if last[0] is moment:
        # A command's events share one "now", formatted for each event's
        # time, its hash and the projection's updated_at: once is enough.
        return last[1]
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("the ledger only records aware datetimes")
    # The text strftime("%Y-%m-%dT%H:%M:%S.%fZ") wrote (the year padded to
    # four digits, which glibc's %Y did not do before 1000), by %-formatting:
    # strftime and isoformat both go through C's printf machinery, several
    # times the cost (bench/profile_append.py; tests/domain/test_event_codec.py).
    u = moment.astimezone(UTC)
    text = _iso_format % (u.year, u.month, u.day, u.hour, u.minute, u.second, u.microsecond)
    _remember_iso(moment, text)
    return text


def _remember_iso(moment: datetime, text: str) -> None:
    global _last_iso
    _last_iso = (moment, text)  # one tuple: a thread reads the old pair or the new


_last_iso: tuple[datetime | None, str] = (None, "")
_iso_format = "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ"


# ---------------------------------------------------------------- payloads, one per kind
#
# Fields are declared in the order the domain wrote their keys before payloads
# existed. A field without a default is always stored (None as null); an
# ``optional()`` one only when set. Nested values (a policy, a checkpoint, an
# artifact, evidence items) stay the JSON the domain validated: they are
# stored as they are and compared byte for byte.

Json = dict[str, Any]


@event_kind(GOAL_STARTED, version=2)
@dataclass(frozen=True, slots=True, kw_only=True)
class GoalStarted(Payload):
    goal_id: str
    workspace: str
    goal_key: str
    objective: str
    done_criteria: list[str]
    agent: str
    policy: Json
    session: Json
    timeout_seconds: int | None
    estimated_duration_seconds: int | None
    checkpoint: Json  # the plan: the goal's first checkpoint


@event_kind(WORKSPACE_BOUND)
@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceBound(Payload):
    workspace: str


@event_kind(WORKSPACE_RELEASED)
@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceReleased(Payload):
    workspace: str
    by_operator: bool
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseGranted(Payload):
    """What both kinds that grant a lease record (not a kind of its own)."""

    holder: str
    generation: int
    token_sha256: str
    lease_seconds: int
    expires_at: str
    # agent | wake (an automatic continuation, the uncertain-attempt rule watches it) | pull.
    # Leases granted before it was recorded are read as "agent" (upcasters).
    via: str
    # A lease call that resumed a due wake (the continuation budget): which one.
    pulled: Json | None = optional()


@event_kind(LEASE_ACQUIRED, version=2)
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseAcquired(LeaseGranted):
    pass


@event_kind(LEASE_TAKEN_OVER, version=2)
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseTakenOver(LeaseGranted):
    previous_holder: str
    previous_generation: int
    previous_expires_at: str


@event_kind(LEASE_RENEWED)
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseRenewed(Payload):
    generation: int
    expires_at: str


@event_kind(LEASE_RELEASED)
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseReleased(Payload):
    generation: int
    why: str | None = optional()  # a dispatch that certainly started nothing


@event_kind(LEASE_EXPIRED)
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseExpired(Payload):
    generation: int
    holder: str
    expired_at: str


@event_kind(CHECKPOINT_RECORDED, version=2)
@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointRecorded(Payload):
    current_step: str
    progress_pct: int
    completed: list[str]
    next_actions: list[str]
    artifacts: list[Json]  # {path, sha256, bytes}
    errors: list[str]
    note: str
    generation: int


@event_kind(GOAL_FINISH_REQUESTED)
@dataclass(frozen=True, slots=True, kw_only=True)
class GoalFinishRequested(Payload):
    status: str  # completed | failed | blocked
    summary: str
    generation: int
    evidence: list[Json] | None = optional()  # with completed


@event_kind(GOAL_COMPLETED, version=2)
@dataclass(frozen=True, slots=True, kw_only=True)
class GoalCompleted(Payload):
    summary: str
    generation: int
    # One {criterion, evidence} per done criterion; a completion recorded
    # before evidence existed has none.
    evidence: list[Json] | None = optional()


@event_kind(GOAL_FAILED, version=2)
@dataclass(frozen=True, slots=True, kw_only=True)
class GoalFailed(Payload):
    summary: str
    generation: int
    reason: str


@event_kind(GOAL_BLOCKED, version=2)
@dataclass(frozen=True, slots=True, kw_only=True)
class GoalBlocked(Payload):
    summary: str
    generation: int
    reason: str


@event_kind(GOAL_PAUSED)
@dataclass(frozen=True, slots=True, kw_only=True)
class GoalPaused(Payload):
    until: str
    basis: str
    generation: int


@event_kind(GOAL_STOPPED)
@dataclass(frozen=True, slots=True, kw_only=True)
class GoalStopped(Payload):
    operator: str
    reason: str
    summary: str


@event_kind(GOAL_RECOVERED)
@dataclass(frozen=True, slots=True, kw_only=True)
class GoalRecovered(Payload):
    operator: str
    reason: str
    from_status: str
    from_reason: str
    written_off_jobs: list[str] | None = optional()  # a silence's running jobs


@event_kind(RUN_REPORTED)
@dataclass(frozen=True, slots=True, kw_only=True)
class RunReported(Payload):
    outcome: str  # ok | error | note
    error_class: str = stored_as("class")
    reset_at: str
    retry_after: str
    # With outcome "note": what the run went on through (ledger.domain.runs.NOTES),
    # recorded without a pause; absent on every other report.
    note: str | None = optional()


@event_kind(CONTINUATION_CHARGED)
@dataclass(frozen=True, slots=True, kw_only=True)
class ContinuationCharged(Payload):
    attempt: int
    max: int
    occurrence_id: str


@event_kind(CONTINUATION_DISPATCHED)
@dataclass(frozen=True, slots=True, kw_only=True)
class ContinuationDispatched(Payload):
    occurrence_id: str
    dispatcher: str
    ok: bool
    detail: str
    uncertain: bool | None = optional()  # when not ok


@event_kind(APPROVAL_REQUESTED)
@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequested(Payload):
    gate: str
    generation: int
    summary: str


@event_kind(APPROVAL_RESOLVED)
@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalResolved(Payload):
    gate: str
    decision: str  # approve | reject
    operator: str
    note: str


@event_kind(WAKE_SCHEDULED, version=2)
@dataclass(frozen=True, slots=True, kw_only=True)
class WakeScheduled(Payload):
    """A watchdog prepared (no ``kind``), or a one-off wake (``kind`` reset or
    requested); a repair (``repair``) recreates a wake's schedule row."""

    backend: str | None = optional()  # the watchdog's
    interval_seconds: int | None = optional()
    tzid: str | None = optional()
    first_due_at: str | None = optional()
    # A watchdog's create attempt (1, or 2 for the one retry); a repair's count
    # since the wake last fired (older repairs, which had none, count one).
    attempt: int | None = optional()
    schedule_name: str | None = optional()  # internal only
    kind: str | None = optional()  # reset | requested (a one-off wake)
    due_at: str | None = optional()
    reason: str | None = optional()  # requested: why
    requested_by: str | None = optional()
    replaces: str | None = optional()  # the pending requested wake's due time
    repair: str | None = optional()  # missing | exhausted | late

    @property
    def one_off(self) -> bool:
        return self.kind in ("reset", "requested")


@event_kind(WAKE_CANCEL_REQUESTED)
@dataclass(frozen=True, slots=True, kw_only=True)
class WakeCancelRequested(Payload):
    backend: str
    note: str


@event_kind(WAKE_CLAIMED, version=2)
@dataclass(frozen=True, slots=True, kw_only=True)
class WakeClaimed(Payload):
    """A wake's claim, built in one place for every path that records one
    (``ledger.domain.claims``: a claim, settle's unblocked host goal, a job
    that ended on a host goal). The optional fields are recorded only when set."""

    occurrence_id: str
    source: str  # internal | host | operator
    kind: str  # one of WAKE_KINDS
    outcome: str
    reason: str  # one of WAKE_REASONS
    notes: str
    slot: str | None = optional()  # the recurring slot it belongs to (ISO)
    next_due_at: str | None = optional()  # the watchdog's next slot, when it moves
    operator: str | None = optional()  # an operator's wake: who
    why: str | None = optional()  # and why
    # granted: wakes since the last checkpoint (the wake-loop bound)
    retry_count: int | None = optional()
    retry_after_seconds: int | None = optional()
    # ready_for_pull: a recovery continuation (the continuation budget)
    charge: bool | None = optional()
    early: bool | None = optional()  # a host fire before its slot: claims no slot
    anchor: str | None = optional()  # a host fire that re-anchored the slots here (ISO)

    def event(self, now: datetime) -> Event:
        return Event(self, now)


@event_kind(RECEIPT_RECORDED, version=2)
@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiptRecorded(Payload):
    backend: str  # internal | host
    status: str  # one of watchdogs.RECEIPT_STATUSES
    schedule_name: str | None = optional()  # internal
    due_at: str | None = optional()
    note: str | None = optional()
    host_ref_sha256: str | None = optional()  # host, created
    runs_on: str | None = optional()
    attested_by: str | None = optional()  # user_attested_deleted
    retry_allowed: bool | None = optional()  # create_failed
    repair: str | None = optional()  # missing | exhausted | late | orphaned
    attempt: int | None = optional()  # a repair's count since the wake last fired


@event_kind(JOB_TRACKED)
@dataclass(frozen=True, slots=True, kw_only=True)
class JobTracked(Payload):
    job_id: str
    kind: str
    ref: str
    notify_sha256: str | None = optional()
    link: str | None = optional()


@event_kind(JOB_UPDATED)
@dataclass(frozen=True, slots=True, kw_only=True)
class JobUpdated(Payload):
    job_id: str
    status: str
    conclusion: str
    reported_by: str | None = optional()  # notify_token: the job's own token said it
    link: str | None = optional()


@event_kind(LIVENESS_MISSED)
@dataclass(frozen=True, slots=True, kw_only=True)
class LivenessMissed(Payload):
    """A deadline passed without its evidence; the facts each reason has."""

    reason: str  # JOB_SILENT | NO_PROGRESS | HOST_SILENT | WAKE_NOT_FIRING | LONG_PAUSE
    expected: str
    detail: str
    deadline: str | None = optional()
    job_id: str | None = optional()  # JOB_SILENT
    last_progress: str | None = optional()  # NO_PROGRESS
    missed_since: str | None = optional()  # HOST_SILENT, with a live watchdog
    schedule_name: str | None = optional()  # WAKE_NOT_FIRING: the row, its due time,
    due_at: str | None = optional()  # (LONG_PAUSE: the reset it waits for)
    problem: str | None = optional()  # what is wrong with it,
    repairs: int | None = optional()  # how often it was repaired,
    last_error: str | None = optional()  # and its task's last exception type
    # NO_PROGRESS: what the goal went through since its last progress (lease
    # grants, empty turns, checkpoints that changed nothing, job ends).
    since_progress: dict[str, int] | None = optional()


@event_kind(CLOCK_STEPPED_BACK)
@dataclass(frozen=True, slots=True, kw_only=True)
class ClockSteppedBack(Payload):
    """The clock read ``ahead_seconds`` behind the goal's last event
    (``last_recorded``): its stamps from the future are now (clocksteps)."""

    last_recorded: str
    ahead_seconds: int

@event_kind(CONTINUATION_HOST_MADE)
@dataclass(frozen=True, slots=True, kw_only=True)
class ContinuationHostMade(Payload):
    host: str  # who continued: claude-code, openclaw, ...
    trigger: str  # session_start | prompt | run_start: the hook that told us
    reset: str  # the pause's end it continued (ISO)
    # The goal's resume policy said no (ask without an approval, quiet hours):
    # the continuation stands (it ran), and the goal is listed for a person.
    breaks_policy: str | None = optional()


@event_kind(CONTINUATION_STOOD_DOWN)
@dataclass(frozen=True, slots=True, kw_only=True)
class ContinuationStoodDown(Payload):
    """A host's continuation that lost: the reset was continued already (a
    wake's stand-down is its wake.claimed, outcome ``stood_down``)."""

    host: str
    trigger: str
    continued_by: str  # how the winner took the lease: wake | pull | host
    reset: str
    why: str


# The older stored shapes' upcasters register themselves with the codec; they
# are loaded with the classes, so nothing can decode before they are known.
from ledger.domain import upcasters  # noqa: E402, F401
