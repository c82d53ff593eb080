from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from api import log_views, views

app_name = "api"

goal = "goals/<str:goal_id>"

urlpatterns = [
    # An agent's every-few-minutes calls first: Django tries the patterns in
    # order, and none of these overlaps another (the schema sorts its paths).
    path(f"{goal}/checkpoints", views.CheckpointsView.as_view(), name="checkpoints"),
    path(f"{goal}/lease/heartbeat", views.HeartbeatView.as_view(), name="heartbeat"),
    path("health", views.health, name="health"),
    path("skill.md", views.SkillView.as_view(), name="skill"),
    path("schema", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file, not inline
    # (the Content-Security-Policy allows no inline script).
    path("docs", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
    path("goals", views.GoalsView.as_view(), name="goals"),
    path(goal, views.GoalView.as_view(), name="goal"),
    path(f"{goal}/checkpoint", views.CheckpointContractView.as_view(), name="checkpoint"),
    path(f"{goal}/events", views.EventsView.as_view(), name="events"),
    path(f"{goal}/resume", views.ResumeView.as_view(), name="resume"),
    path(f"{goal}/lease", views.LeaseView.as_view(), name="lease"),
    path(f"{goal}/continuations", views.ContinuationsView.as_view(), name="continuations"),
    path(f"{goal}/lease/release", views.ReleaseView.as_view(), name="release"),
    path(f"{goal}/finish", views.FinishView.as_view(), name="finish"),
    path(f"{goal}/workspace/release", views.WorkspaceReleaseView.as_view(),
         name="workspace-release"),
    path(f"{goal}/watchdog", views.WatchdogView.as_view(), name="watchdog"),
    path(f"{goal}/watchdog/receipts", views.ReceiptsView.as_view(), name="receipts"),
    path(f"{goal}/claim", views.ClaimView.as_view(), name="claim"),
    path(f"{goal}/jobs", views.JobsView.as_view(), name="jobs"),
    path(f"{goal}/jobs/<str:job_id>/status", views.JobStatusView.as_view(), name="job-status"),
    path(f"{goal}/runs", views.RunsView.as_view(), name="runs"),
    path(f"{goal}/session-activity", views.SessionActivityView.as_view(),
         name="session-activity"),
    path(f"{goal}/approvals", views.ApprovalsView.as_view(), name="approvals"),
    path(f"{goal}/approvals/<str:gate>/resolve", views.ResolveApprovalView.as_view(),
         name="approval-resolve"),
    path(f"{goal}/stop", views.StopView.as_view(), name="stop"),
    path(f"{goal}/recover", views.RecoverView.as_view(), name="recover"),
    path(f"{goal}/wake", views.WakeView.as_view(), name="wake"),
    path("alerts", views.AlertsView.as_view(), name="alerts"),
    path("jobs/<str:job_id>/status", views.JobNotifyView.as_view(), name="job-notify"),
    path("ledger/head", log_views.LogHeadView.as_view(), name="log-head"),
    path("ledger/heads", log_views.LogHeadsView.as_view(), name="log-heads"),
    path("ledger/checkpoint", log_views.CheckpointView.as_view(), name="log-checkpoint"),
    path("ledger/tail", log_views.LogTailView.as_view(), name="log-tail"),
    path("ledger/proof/inclusion", log_views.InclusionProofView.as_view(),
         name="log-inclusion"),
    path("ledger/proof/consistency", log_views.ConsistencyProofView.as_view(),
         name="log-consistency"),
]
