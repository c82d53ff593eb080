"""The agents' REST API (/api/v1/), one module per resource. Thin: parse,
call the use case (``ledger.services``), serialize. No rule lives here.

    common     who asks, lease proofs, roles, pagination, shared OpenAPI pieces
    goals      list, run_goal, one goal, its contract, resume packet, events
    work       the lease, checkpoints, run reports, finish, the workspace
    wakes      the watchdog, its receipts, a host's claim
    jobs       blocking jobs and their notify tokens
    operators  approvals, stop, recover, wake now
    misc       /alerts, the skill document, the health check
"""

from api.views.goals import CheckpointContractView, EventsView, GoalsView, GoalView, ResumeView
from api.views.jobs import JobNotifyView, JobStatusView, JobsView
from api.views.misc import AlertsView, SkillView, health
from api.views.operators import (
    ApprovalsView,
    RecoverView,
    ResolveApprovalView,
    StopView,
    WakeView,
)
from api.views.wakes import ClaimView, ReceiptsView, WatchdogView
from api.views.work import (
    CheckpointsView,
    ContinuationsView,
    FinishView,
    HeartbeatView,
    LeaseView,
    ReleaseView,
    RunsView,
    SessionActivityView,
    WorkspaceReleaseView,
)

__all__ = [
    "AlertsView", "ApprovalsView", "CheckpointContractView", "CheckpointsView", "ClaimView",
    "ContinuationsView",
    "EventsView", "FinishView", "GoalView", "GoalsView", "HeartbeatView", "JobNotifyView",
    "JobStatusView", "JobsView", "LeaseView", "ReceiptsView", "RecoverView", "ReleaseView",
    "ResolveApprovalView", "ResumeView", "RunsView", "SessionActivityView", "SkillView",
    "StopView", "WakeView", "WatchdogView", "WorkspaceReleaseView", "health",
]
