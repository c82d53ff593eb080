"""Every event kind, in one list: its payload class (declared, with how it
folds, its summary line and its style, in the domain module of its family)
and its stored string.

The shells, the tests and the readers import kinds from here; the codec
knows each class once its module is loaded, and this module loads them all,
so nothing decodes before every kind is known. To add a kind: docs/design.md,
"Event kinds".
"""

from ledger.domain.claimed import WakeClaimed
from ledger.domain.clocksteps import ClockSteppedBack
from ledger.domain.codec import Payload
from ledger.domain.continuations import ContinuationHostMade, ContinuationStoodDown
from ledger.domain.dispatches import ContinuationDispatched
from ledger.domain.endings import GoalBlocked, GoalCompleted, GoalFailed
from ledger.domain.events import Style
from ledger.domain.finishing import GoalFinishRequested
from ledger.domain.goals import CheckpointRecorded, GoalStarted, WorkspaceBound, WorkspaceReleased
from ledger.domain.interventions import (
    ApprovalRequested,
    ApprovalResolved,
    GoalRecovered,
    GoalStopped,
)
from ledger.domain.jobs import JobTracked, JobUpdated
from ledger.domain.leases import (
    LeaseAcquired,
    LeaseExpired,
    LeaseGranted,
    LeaseReleased,
    LeaseRenewed,
    LeaseTakenOver,
)
from ledger.domain.overdue import LivenessMissed
from ledger.domain.runs import ContinuationCharged, GoalPaused, RunReported
from ledger.domain.watchdogs import ReceiptRecorded, WakeCancelRequested, WakeScheduled

# In the order a goal's history usually meets them.
PAYLOADS: tuple[type[Payload], ...] = (
    GoalStarted, WorkspaceBound, LeaseAcquired, LeaseTakenOver, LeaseRenewed,
    CheckpointRecorded, LeaseReleased, LeaseExpired, WakeScheduled, ReceiptRecorded,
    WakeCancelRequested, WakeClaimed, ContinuationCharged, ContinuationDispatched,
    ContinuationHostMade, ContinuationStoodDown, RunReported, GoalPaused, ApprovalRequested,
    ApprovalResolved, JobTracked, JobUpdated, LivenessMissed, ClockSteppedBack,
    GoalFinishRequested, GoalCompleted, GoalFailed, GoalBlocked, GoalStopped, GoalRecovered,
    WorkspaceReleased,
)

_STYLES = {payload.KIND: payload.STYLE for payload in PAYLOADS}


def style_of(kind: str) -> Style | None:
    """The look a stored kind names (None: a kind this release does not know)."""
    return _STYLES.get(kind)


GOAL_STARTED = GoalStarted.KIND
GOAL_FINISH_REQUESTED = GoalFinishRequested.KIND
GOAL_PAUSED = GoalPaused.KIND
GOAL_STOPPED = GoalStopped.KIND
GOAL_RECOVERED = GoalRecovered.KIND
GOAL_COMPLETED = GoalCompleted.KIND
GOAL_FAILED = GoalFailed.KIND
GOAL_BLOCKED = GoalBlocked.KIND
RUN_REPORTED = RunReported.KIND
CONTINUATION_CHARGED = ContinuationCharged.KIND
CONTINUATION_DISPATCHED = ContinuationDispatched.KIND
CONTINUATION_HOST_MADE = ContinuationHostMade.KIND
CONTINUATION_STOOD_DOWN = ContinuationStoodDown.KIND
APPROVAL_REQUESTED = ApprovalRequested.KIND
APPROVAL_RESOLVED = ApprovalResolved.KIND
WORKSPACE_BOUND = WorkspaceBound.KIND
WORKSPACE_RELEASED = WorkspaceReleased.KIND
LEASE_ACQUIRED = LeaseAcquired.KIND
LEASE_TAKEN_OVER = LeaseTakenOver.KIND
LEASE_RENEWED = LeaseRenewed.KIND
LEASE_RELEASED = LeaseReleased.KIND
LEASE_EXPIRED = LeaseExpired.KIND
CHECKPOINT_RECORDED = CheckpointRecorded.KIND
WAKE_SCHEDULED = WakeScheduled.KIND
WAKE_CANCEL_REQUESTED = WakeCancelRequested.KIND
WAKE_CLAIMED = WakeClaimed.KIND
RECEIPT_RECORDED = ReceiptRecorded.KIND
JOB_TRACKED = JobTracked.KIND
JOB_UPDATED = JobUpdated.KIND
LIVENESS_MISSED = LivenessMissed.KIND
CLOCK_STEPPED_BACK = ClockSteppedBack.KIND

__all__ = [
    "PAYLOADS",
    "ApprovalRequested",
    "ApprovalResolved",
    "CheckpointRecorded",
    "ClockSteppedBack",
    "ContinuationCharged",
    "ContinuationDispatched",
    "ContinuationHostMade",
    "ContinuationStoodDown",
    "GoalBlocked",
    "GoalCompleted",
    "GoalFailed",
    "GoalFinishRequested",
    "GoalPaused",
    "GoalRecovered",
    "GoalStarted",
    "GoalStopped",
    "JobTracked",
    "JobUpdated",
    "LeaseAcquired",
    "LeaseExpired",
    "LeaseGranted",
    "LeaseReleased",
    "LeaseRenewed",
    "LeaseTakenOver",
    "LivenessMissed",
    "ReceiptRecorded",
    "RunReported",
    "WakeCancelRequested",
    "WakeClaimed",
    "WakeScheduled",
    "WorkspaceBound",
    "WorkspaceReleased",
    "style_of",
]
