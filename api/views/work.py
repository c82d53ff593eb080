"""An agent's fenced work: the lease (acquire, heartbeat, release),
checkpoints, how a run ended, finishing, and the workspace binding."""

from functools import partial
from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from api import serializers
from api.auth import caller
from api.idempotency import idempotent, lease_token
from api.schema import responses
from api.views.common import (
    FENCED,
    IDEMPOTENCY,
    LEASE_EXAMPLE,
    LEASE_LOST_EXAMPLE,
    VALIDATION_EXAMPLE,
    WRITE,
    LedgerView,
    api_url,
)
from ledger.access.accounts import AGENT, OPERATOR, role_of
from ledger.domain import Artifact
from ledger.domain.commands import Evidence, WakeRequest
from ledger.services import continuations, goals, runs, work
from ledger.services.tokens import proof


def wake_request(data: dict[str, Any]) -> WakeRequest | None:
    """The one-off wake a release or a checkpoint asks for."""
    wake = data.get("wake")
    if wake is None:
        return None
    return WakeRequest(wake.get("in_seconds"), wake.get("at", ""), wake["reason"])


class LeaseView(LedgerView):
    roles = {"POST": (AGENT,)}

    @extend_schema(
        summary="Acquire the lease, or take over a stale one",
        description="A live lease is never stolen. Past its expiry plus the 60 s stale grace "
                    "(and with no running blocking job) it is taken over with generation + 1. "
                    "A refused acquire answers acquired: false with retry_after_seconds.",
        request=serializers.EmptySerializer, parameters=[IDEMPOTENCY],
        responses=responses({200: serializers.LeaseAnswerSerializer}, *WRITE, "goal_blocked",
                            "not_started"),
    )
    @idempotent(serializers.EmptySerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        return Response(goals.acquire(caller(request), goal_id, lease_token(request)))


class ContinuationsView(LedgerView):
    roles = {"POST": (AGENT,)}

    @extend_schema(
        summary="The host continued this session by itself",
        description="A host that continues a session on its own at a usage-limit reset "
                    "(Claude Code's auto-continue, an OpenClaw run) says so: the reset's one "
                    "continuation (host_continued, charged once, the lease is yours), or "
                    "another continuation of that reset came first (stood_down: do no work "
                    "in this run), or not a reset's continuation (not_a_reset, nothing "
                    "recorded).",
        request=serializers.HostContinuedSerializer, parameters=[IDEMPOTENCY],
        responses=responses({200: serializers.HostContinuedAnswerSerializer}, *WRITE,
                            "not_started"),
    )
    @idempotent(serializers.HostContinuedSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        return Response(continuations.host_continued(
            caller(request), goal_id, lease_token(request), host=data["host"],
            trigger=data["trigger"], session_key=data["session_key"]))


class HeartbeatView(LedgerView):
    roles = {"POST": (AGENT,)}

    @extend_schema(summary="Renew the lease", request=serializers.FencedSerializer,
                   parameters=[IDEMPOTENCY],
                   examples=[OpenApiExample("heartbeat", request_only=True,
                                            value={"lease": LEASE_EXAMPLE}), LEASE_LOST_EXAMPLE],
                   responses=responses({200: serializers.HeartbeatAnswerSerializer}, *FENCED))
    @idempotent(serializers.FencedSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        return Response(goals.heartbeat(caller(request), goal_id, proof(data.get("lease"))))


class ReleaseView(LedgerView):
    roles = {"POST": (AGENT,)}

    @extend_schema(summary="Release the lease (optionally: wake me in N minutes)",
                   request=serializers.ReleaseSerializer, parameters=[IDEMPOTENCY],
                   responses=responses({200: serializers.ReleaseAnswerSerializer}, *FENCED))
    @idempotent(serializers.ReleaseSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        released = work.release(caller(request), goal_id, proof(data.get("lease")),
                                wake_request(data), api_url=partial(api_url, request))
        return Response(released.as_dict())


class CheckpointsView(LedgerView):
    roles = {"POST": (AGENT,)}

    @extend_schema(
        summary="Record a checkpoint (fenced)",
        request=serializers.CheckpointSerializer, parameters=[IDEMPOTENCY],
        responses=responses({201: serializers.CheckpointAnswerSerializer}, *FENCED,
                            "progress_regressed", "artifact_conflict"),
        examples=[OpenApiExample("checkpoint", request_only=True, value={
            "lease": LEASE_EXAMPLE, "current_step": "tests written", "progress_pct": 40,
            "completed": ["reproduced the failure"], "next_actions": ["fix the race"],
            "artifacts": [{"path": "tests/test_checkout.py", "sha256": "9f" * 32,
                           "bytes": 2048}],
            "note": "", "release_lease": False}), LEASE_LOST_EXAMPLE, VALIDATION_EXAMPLE],
    )
    @idempotent(serializers.CheckpointSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        done = work.checkpoint(
            caller(request), goal_id, proof(data.get("lease")),
            current_step=data["current_step"], progress_pct=data["progress_pct"],
            completed=tuple(data["completed"]), next_actions=tuple(data["next_actions"]),
            artifacts=tuple(Artifact(a["path"], a["sha256"], a["bytes"],
                                     a.get("previous_sha256")) for a in data["artifacts"]),
            errors=tuple(data["errors"]), note=data["note"],
            release_lease=data["release_lease"], wake=wake_request(data),
            api_url=partial(api_url, request))
        return Response(done.as_dict(), status=201)


class RunsView(LedgerView):
    roles = {"POST": (AGENT,)}

    @extend_schema(
        summary="Report how a run ended (rate limits, auth failures, …)",
        description="The error text is classified and its reset time parsed, then "
                    "discarded. A rate limit pauses the goal until the reset + 2 min (no "
                    "reset found: 30 min, doubling, at most 24 h) and schedules one wake.",
        request=serializers.RunSerializer, parameters=[IDEMPOTENCY],
        responses=responses({200: serializers.RunAnswerSerializer}, *FENCED),
        examples=[OpenApiExample("rate limit", request_only=True, value={
            "lease": LEASE_EXAMPLE, "outcome": "error",
            "error_text": "Claude usage limit reached. Your limit will reset at 8am "
                          "(Europe/Istanbul).", "timezone": "Europe/Istanbul"})])
    @idempotent(serializers.RunSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        report = runs.report_run(
            caller(request), goal_id, proof(data.get("lease")), outcome=data["outcome"],
            error_text=data["error_text"], timezone=data["timezone"],
            retry_after=data["retry_after"], session=data.get("session"), note=data["note"])
        return Response(report.as_dict())


class SessionActivityView(LedgerView):
    roles = {"POST": (AGENT,)}

    @extend_schema(
        summary="Report a later turn of the goal's session finished by hand",
        description="An observer (the OpenClaw plugin) saw the owner's turn in the goal's "
                    "registered session finish without the goal's lease: the goal blocks "
                    "with SESSION_ACTIVITY for a human to recover. Once per stop.",
        request=serializers.SessionActivitySerializer, parameters=[IDEMPOTENCY],
        responses=responses({200: serializers.RunAnswerSerializer}, *WRITE, "not_started"))
    @idempotent(serializers.SessionActivitySerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        report = runs.report_session_activity(caller(request), goal_id, data["session"])
        return Response(report.as_dict())


class FinishView(LedgerView):
    roles = {"POST": (AGENT,)}

    @extend_schema(summary="Finish the goal (fenced)", request=serializers.FinishSerializer,
                   parameters=[IDEMPOTENCY],
                   responses=responses({200: serializers.FinishAnswerSerializer}, *FENCED,
                                       "jobs_running"),
                   examples=[OpenApiExample("finish", request_only=True, value={
                       "lease": LEASE_EXAMPLE, "status": "completed",
                       "summary": "PR #12 merged, CI green",
                       "evidence": [{"criterion": "CI green on main",
                                     "evidence": "https://ci.example/run/981: 212 passed"}]}),
                       LEASE_LOST_EXAMPLE])
    @idempotent(serializers.FinishSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        evidence = tuple(Evidence(i["criterion"], i["evidence"]) for i in data["evidence"])
        finished = work.finish(caller(request), goal_id, proof(data.get("lease")),
                               status=data["status"], summary=data["summary"],
                               evidence=evidence)
        return Response(finished.as_dict())


class WorkspaceReleaseView(LedgerView):
    roles = {"POST": (AGENT, OPERATOR)}

    @extend_schema(summary="Release the workspace binding (holder or operator)",
                   request=serializers.WorkspaceReleaseSerializer, parameters=[IDEMPOTENCY],
                   responses=responses({200: serializers.WorkspaceAnswerSerializer}, *FENCED))
    @idempotent(serializers.WorkspaceReleaseSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        by_operator = role_of(request.user) == OPERATOR and "lease" not in data
        released = work.release_workspace(caller(request), goal_id, proof(data.get("lease")),
                                          by_operator=by_operator, reason=data["reason"])
        return Response(released.as_dict())
