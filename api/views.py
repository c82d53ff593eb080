"""The agents' REST API (/api/v1/). Thin: parse, build a domain command, run it
through the store, shape the answer. No rule lives here."""

import uuid
from typing import Any

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound, Throttled
from rest_framework.pagination import CursorPagination
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api import serializers
from api.auth import HasRole
from api.digests import host_ref_digest
from api.idempotency import idempotent, lease_token
from api.problems import PROBLEM_CONTENT_TYPE, Problem
from api.schema import BODY, CALLER, GOAL, IDEMPOTENT, QUERY, responses
from api.serializers import validated
from ledger import alerts, clock, siteurl, store, throttle
from ledger.accounts import AGENT, AUDITOR, OPERATOR, role_of
from ledger.domain import (
    Artifact,
    Finish,
    GoalState,
    LeaseProof,
    RecordCheckpoint,
    ReleaseLease,
    ReleaseWorkspace,
    liveness,
)
from ledger.domain.commands import Evidence, WakeRequest
from ledger.domain.finishing import completion_state
from ledger.domain.jobs import UpdateJob
from ledger.domain.leases import lease_live
from ledger.domain.policy import interval_minutes
from ledger.domain.runs import RequestApproval
from ledger.domain.smartwake import resume_packet
from ledger.domain.timing import next_wake_at
from ledger.domain.validation import canonical_workspace
from ledger.domain.watchdogs import (
    HOST,
    CancelWatchdog,
    PrepareWatchdog,
    RecordReceipt,
    watchdog_health,
)
from ledger.models import Event, Goal
from ledger.services import goals, jobs, operators, runs, tokens, wakes
from ledger.services.goals import Caller

READERS = (AGENT, AUDITOR, OPERATOR)

# ----------------------------------------------------------------------- helpers


def proof(data: dict[str, Any] | None) -> LeaseProof | None:
    return tokens.proof(data)


def goal_body(state: GoalState) -> dict[str, Any]:
    body = state.to_dict()
    body["id"] = body.pop("goal_id")
    lease = body.pop("lease")
    # The token digest stays inside: callers prove the token, they never read it.
    # "active" is shown as a reader takes it (live now); the stored flag of
    # that name (rule 6: a sign of life since the grant) is heard_from_holder.
    body["lease"] = ({**{k: v for k, v in lease.items() if k not in ("token_sha256", "active")},
                      "active": lease_live(state, clock.now()),
                      "heard_from_holder": bool(lease.get("active"))}
                     if lease else None)
    body["watchdog"] = watchdog_body(state)
    body["next_wake_at"] = next_wake_at(state) or None
    now = clock.now()
    body["liveness"] = liveness.label(state, now)
    body["expected"] = liveness.expectation(state).as_dict()
    reason = liveness.alert(state, now)
    body["alert"] = {"reason": reason, "why": liveness.why(reason)} if reason else None
    body.pop("liveness_alert")  # shown as ``alert``
    body.pop("claimed")  # bookkeeping for already_claimed
    body["jobs"] = [job_body(job) for job in state.jobs]
    return body


def watchdog_body(state: GoalState) -> dict[str, Any] | None:
    if not state.watchdog:
        return None
    shown = {k: v for k, v in state.watchdog.items() if k != "host_ref_sha256"}
    return {**shown, "health": watchdog_health(state)}


def visible_goals(request: Request) -> Any:
    goals = Goal.objects.all()
    if role_of(request.user) == AGENT:
        goals = goals.filter(agent=request.user.get_username())
    return goals


def load_goal(request: Request, goal_id: str) -> GoalState:
    """The goal, if this caller may see it; another agent's goal is a 404."""
    try:
        pk = uuid.UUID(str(goal_id))
    except ValueError:
        raise Problem("not_found", f"{goal_id!r} is not a goal id.") from None
    row = visible_goals(request).filter(pk=pk).values_list("state", flat=True).first()
    if row is None:
        raise Problem("not_found", f"No goal {goal_id}.")
    return GoalState.from_dict(row)


def actor(request: Request) -> str:
    return request.user.get_username()


def caller(request: Request) -> Caller:
    """Who asks: an agent sees only its own goals (checked by the store on the
    row it locks, so a use case costs no separate read: another agent's goal
    is a 404 before any rule)."""
    name = actor(request)
    return Caller(name, owner=name if role_of(request.user) == AGENT else None,
                  idempotency_key=getattr(request, "idempotency_key", None))


def run(request: Request, goal_id: str, command: Any) -> store.Outcome:
    """Run a command on a goal this caller may see; the URL may spell the id
    in any form uuid accepts."""
    return goals.execute(caller(request), goal_id, command)


# The problems each kind of operation declares beside its own (api.schema.responses).
WRITE = (*GOAL, *BODY, *IDEMPOTENT, "goal_terminal", "version_conflict")
FENCED_BODY = (*GOAL, *BODY, "lease_required", "lease_lost", "not_started", "goal_terminal",
               "goal_blocked", "version_conflict")
FENCED = (*FENCED_BODY, *IDEMPOTENT)

LEASE_LOST_EXAMPLE = OpenApiExample(
    "lease_lost", response_only=True, status_codes=["409"], media_type=PROBLEM_CONTENT_TYPE,
    value={
        "type": "urn:wakeledger:problem:lease_lost", "title": "The lease is no longer yours.",
        "status": 409, "detail": "lease generation 1 is stale; the current one is 2",
        "code": "lease_lost", "errors": {"lease.generation": ["lease generation 1 is stale; "
                                                               "the current one is 2"]},
        "current_generation": 2})
VALIDATION_EXAMPLE = OpenApiExample(
    "validation_error", response_only=True, status_codes=["400"],
    media_type=PROBLEM_CONTENT_TYPE, value={
        "type": "urn:wakeledger:problem:validation_error",
        "title": "The request is not valid.", "status": 400,
        "detail": "Some fields are not valid; see errors.", "code": "validation_error",
        "errors": {"progress_pct": ["Ensure this value is less than or equal to 100."]}})
IDEMPOTENCY = OpenApiParameter(
    "Idempotency-Key", {"type": "string", "minLength": 1, "maxLength": 255,
                        "pattern": "^[!-~]([ -~]*[!-~])?$"},
    OpenApiParameter.HEADER, required=False,
    description="Same key and body replays the first response; another body is 422.")
LEASE_EXAMPLE = {"token": "wll_…", "generation": 1}


class LedgerView(APIView):
    permission_classes = [HasRole]
    roles: dict[str, tuple[str, ...]] = {"GET": READERS}


# ----------------------------------------------------------------------- goals


class GoalPagination(CursorPagination):
    # created_at never changes, so a cursor never skips or repeats a goal.
    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200

    def decode_cursor(self, request: Request) -> Any:
        try:
            return super().decode_cursor(request)
        except NotFound:
            raise Problem("validation_error", "The cursor is not valid; start again "
                          "without one.", errors={"cursor": ["Invalid cursor."]}) from None


class GoalsView(LedgerView):
    roles = {"GET": READERS, "POST": (AGENT,)}

    @extend_schema(
        summary="List goals",
        operation_id="goals_list",  # a page object, which drf-spectacular would call a retrieve
        parameters=[serializers.GoalFilterSerializer],
        responses=responses({200: serializers.GoalPageSerializer}, *QUERY),
    )
    def get(self, request: Request) -> Response:
        filters = validated(serializers.GoalFilterSerializer, request.query_params.dict())
        rows = visible_goals(request)
        for name in ("status", "reason", "agent"):
            if name in filters:
                rows = rows.filter(**{name: filters[name]})
        if "workspace" in filters:
            rows = rows.filter(workspace=canonical_workspace(filters["workspace"]))
        paginator = GoalPagination()
        page = paginator.paginate_queryset(rows.only("id", "created_at", "state"), request,
                                           view=self)
        return paginator.get_paginated_response(
            [goal_body(GoalState.from_dict(goal.state)) for goal in page])

    @extend_schema(
        summary="Start or resume a goal (run_goal) and try to take its lease",
        request=serializers.RunGoalSerializer,
        parameters=[IDEMPOTENCY],
        responses=responses({201: serializers.RunGoalAnswerSerializer,
                             200: serializers.RunGoalAnswerSerializer},
                            *BODY, *IDEMPOTENT, "workspace_bound", "session_bound",
                            "goal_terminal", "goal_blocked", "version_conflict"),
        examples=[OpenApiExample("start", request_only=True, value={
            "goal_key": "issue-42", "workspace": "/srv/repos/shop",
            "objective": "Fix the flaky checkout test", "done_criteria": ["CI green"],
            "next_actions": ["reproduce locally", "fix", "open PR"],
            "session": {"agent_id": "claude-code", "session_key": "shop-42",
                        "timezone": "Europe/Istanbul"},
            "policy": {"lease_seconds": 600, "max_continuations": 3},
            "timeout_seconds": 3600, "estimated_duration_seconds": 5400})],
    )
    @idempotent(serializers.RunGoalSerializer)
    def post(self, request: Request, data: dict[str, Any]) -> Response:
        answer = goals.run_goal(
            caller(request), lease_token(request), workspace=data["workspace"],
            goal_key=data["goal_key"], objective=data["objective"],
            done_criteria=tuple(data["done_criteria"]),
            next_actions=tuple(data["next_actions"]), policy=data.get("policy"),
            session=data.get("session"), timeout_seconds=data.get("timeout_seconds"),
            estimated_duration_seconds=data.get("estimated_duration_seconds"))
        body = {"goal": goal_body(answer.state), "created": answer.created, **answer.lease,
                "preflight": answer.preflight}
        return Response(body, status=201 if answer.created else 200)


class GoalView(LedgerView):
    @extend_schema(summary="A goal's projected state",
                   responses=responses({200: serializers.GoalSerializer}, *GOAL))
    def get(self, request: Request, goal_id: str) -> Response:
        return Response(goal_body(load_goal(request, goal_id)))


class CheckpointContractView(LedgerView):
    @extend_schema(summary="The smart-wake checkpoint contract",
                   responses=responses({200: serializers.CheckpointContractSerializer}, *GOAL))
    def get(self, request: Request, goal_id: str) -> Response:
        return Response(load_goal(request, goal_id).checkpoint_contract())


class ResumeView(LedgerView):
    @extend_schema(summary="The resume packet: where to pick up, exactly",
                   responses=responses({200: serializers.ResumePacketSerializer}, *GOAL))
    def get(self, request: Request, goal_id: str) -> Response:
        return Response(resume_packet(load_goal(request, goal_id)))


class EventsView(LedgerView):
    @extend_schema(summary="A goal's history, in seq order",
                   parameters=[serializers.EventsQuerySerializer],
                   responses=responses({200: serializers.EventPageSerializer}, *GOAL, *QUERY))
    def get(self, request: Request, goal_id: str) -> Response:
        query = validated(serializers.EventsQuerySerializer, request.query_params.dict())
        state = load_goal(request, goal_id)
        rows = list(
            Event.objects.filter(goal_id=state.goal_id, seq__gt=query["after"])
            .order_by("seq")
            .values("seq", "kind", "data", "actor", "recorded_at", "prev_hash", "hash")
            [:query["limit"] + 1]
        )
        more = len(rows) > query["limit"]
        rows = rows[:query["limit"]]
        for row in rows:
            row["recorded_at"] = row["recorded_at"].isoformat()
        return Response({"events": rows, "next_after": rows[-1]["seq"] if more else None})


# ----------------------------------------------------------------------- leases


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
        state = run(request, goal_id, ReleaseLease(proof(data.get("lease")),
                                                   wake_request(data))).state
        return Response({"released": True, "status": state.status,
                         "requested_wake": requested_wake_answer(state, request)})


def wake_request(data: dict[str, Any]) -> WakeRequest | None:
    wake = data.get("wake")
    if wake is None:
        return None
    return WakeRequest(wake.get("in_seconds"), wake.get("at", ""), wake["reason"])


def requested_wake_answer(state: GoalState, request: Request) -> dict[str, Any] | None:
    """The pending one-off wake; a host goal's host must create it itself."""
    wake = state.requested_wake
    if not wake:
        return None
    answer = {k: wake[k] for k in ("due_at", "reason") if k in wake}
    if state.setting("scheduler") == HOST:
        answer["host_one_off"] = {
            "occurrence": "once", "run_at": wake["due_at"],
            "destination": {"method": "POST",
                            "url": f"{siteurl.api_url(request)}/goals/{state.goal_id}/claim",
                            "body": {"occurrence_id": "<the host run's id>",
                                     "reason": wake.get("reason", "")}}}
    return answer


# ----------------------------------------------------------------------- work


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
        command = RecordCheckpoint(
            current_step=data["current_step"],
            progress_pct=data["progress_pct"],
            completed=tuple(data["completed"]),
            next_actions=tuple(data["next_actions"]),
            artifacts=tuple(Artifact(a["path"], a["sha256"], a["bytes"],
                                     a.get("previous_sha256")) for a in data["artifacts"]),
            errors=tuple(data["errors"]),
            note=data["note"],
            release_lease=data["release_lease"],
            proof=proof(data.get("lease")),
            wake=wake_request(data),
        )
        state = run(request, goal_id, command).state
        return Response({"checkpoint": state.checkpoint_contract(), "version": state.version,
                         "lease_released": data["release_lease"],
                         "requested_wake": requested_wake_answer(state, request)}, status=201)


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
        state = run(request, goal_id, Finish(data["status"], data["summary"],
                                             proof(data.get("lease")), evidence)).state
        return Response({"completion_state": completion_state(state), "goal": goal_body(state)})


class WorkspaceReleaseView(LedgerView):
    roles = {"POST": (AGENT, OPERATOR)}

    @extend_schema(summary="Release the workspace binding (holder or operator)",
                   request=serializers.WorkspaceReleaseSerializer, parameters=[IDEMPOTENCY],
                   responses=responses({200: serializers.WorkspaceAnswerSerializer}, *FENCED))
    @idempotent(serializers.WorkspaceReleaseSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        by_operator = role_of(request.user) == OPERATOR and "lease" not in data
        command = ReleaseWorkspace(proof=proof(data.get("lease")), by_operator=by_operator,
                                   reason=data["reason"])
        state = run(request, goal_id, command).state
        return Response({"workspace": state.workspace, "workspace_bound": state.workspace_bound})


# ----------------------------------------------------------------------- wakes


def watchdog_answer(state: GoalState, request: Request) -> dict[str, Any]:
    watchdog = state.watchdog
    status = watchdog.get("status", "")
    action = {
        "requested": "create_the_host_schedule_and_record_a_receipt",
        "uncertain": "reconcile_with_the_host_then_record_a_receipt",
        "create_failed": "retry_the_create_once" if watchdog.get("retry_allowed") else None,
        "cancel_requested": "delete_the_host_schedule_and_record_a_receipt",
    }.get(status)
    answer: dict[str, Any] = {"watchdog": watchdog_body(state), "next_required_action": action}
    if watchdog.get("backend") == HOST and status in ("requested", "create_failed"):
        answer["host_schedule"] = {
            "occurrence": "interval",
            "interval_minutes": interval_minutes(watchdog["interval_seconds"]),
            "interval_seconds": watchdog["interval_seconds"],
            "tzid": watchdog["tzid"],
            "first_due_at": watchdog["first_due_at"],
            "destination": {"method": "POST",
                            "url": f"{siteurl.api_url(request)}/goals/{state.goal_id}/claim",
                            "body": {"occurrence_id": "<the host run's id>"}},
        }
    if status == "cancel_requested":
        answer["cleanup"] = {"delete": "the host schedule created for this goal",
                             "then": f"POST /api/v1/goals/{state.goal_id}/watchdog/receipts "
                                     "with status cancelled (or user_attested_deleted)"}
    return answer


class WatchdogView(LedgerView):
    roles = {"POST": (AGENT,), "DELETE": (AGENT,)}

    @extend_schema(
        summary="Ensure the goal's one watchdog (idempotent)",
        description="internal: the server creates a django-q2 schedule. host: the answer is "
                    "the schedule the agent's host must create, then report with a receipt. "
                    "Calling again never creates a second watchdog or retimes it.",
        request=serializers.WatchdogSerializer, parameters=[IDEMPOTENCY],
        responses=responses({200: serializers.WatchdogAnswerSerializer}, *FENCED))
    @idempotent(serializers.WatchdogSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        state = goals.state_of(caller(request), goal_id)
        command = PrepareWatchdog(proof(data.get("lease")), 0, state.zone(data["tzid"]))
        return Response(watchdog_answer(run(request, goal_id, command).state, request))

    @extend_schema(summary="Cancel the watchdog", request=serializers.FencedSerializer,
                   responses=responses({200: serializers.WatchdogAnswerSerializer}, *FENCED_BODY))
    def delete(self, request: Request, goal_id: str) -> Response:
        data = validated(serializers.FencedSerializer, request.data)
        state = run(request, goal_id, CancelWatchdog(proof(data.get("lease")))).state
        return Response(watchdog_answer(state, request))


class ReceiptsView(LedgerView):
    roles = {"POST": (AGENT,)}

    @extend_schema(summary="Record what the host did with the watchdog",
                   request=serializers.ReceiptSerializer, parameters=[IDEMPOTENCY],
                   responses=responses({200: serializers.WatchdogAnswerSerializer}, *FENCED))
    @idempotent(serializers.ReceiptSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        ref = data["host_ref"]
        command = RecordReceipt(
            proof(data.get("lease")), data["status"],
            # Host task ids are stored as digests only.
            host_ref_digest(ref) if ref else "",
            data["due_at"], data["runs_on"], data["verified"], data["attested_by"],
            data["note"])
        state = run(request, goal_id, command).state
        return Response({**watchdog_answer(state, request),
                         "completion_state": completion_state(state)})


class ClaimView(LedgerView):
    roles = {"POST": (AGENT,)}

    @extend_schema(
        summary="Claim a wake (what a host-fired task calls)",
        description="Decided in one transaction; exactly one outcome. A granted claim "
                    "(recurring_acquired) returns the resume packet and a new lease.",
        request=serializers.ClaimSerializer, parameters=[IDEMPOTENCY],
        responses=responses({200: serializers.ClaimAnswerSerializer}, *WRITE))
    @idempotent(serializers.ClaimSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        # Without an occurrence id, the domain names the claim after the
        # watchdog's slot it belongs to, so two fires for one slot are one claim.
        occurrence = f"host:{data['occurrence_id']}" if data.get("occurrence_id") else ""
        who = caller(request)
        result = wakes.claim(goal_id, source=HOST, occurrence_id=occurrence,
                             reason=data.get("reason", ""), holder=who.name, actor=who.name,
                             idempotency_key=who.idempotency_key, token=lease_token(request),
                             owner=who.owner)
        return Response(result.as_dict())


class JobsView(LedgerView):
    roles = {"POST": (AGENT,)}

    @extend_schema(summary="Track a blocking job (one exact run)",
                   request=serializers.JobSerializer, parameters=[IDEMPOTENCY],
                   responses=responses({201: serializers.JobAnswerSerializer}, *FENCED))
    @idempotent(serializers.JobSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        tracked = jobs.track(caller(request), goal_id, proof(data.get("lease")),
                             kind=data["kind"], ref=data["ref"], link=data["link"],
                             notify=data["notify"])
        answer: dict[str, Any] = {"job": job_body(tracked.job), "goal_id": tracked.goal_id}
        if tracked.notify_token:  # shown once, when the job is new
            answer["notify_token"] = tracked.notify_token
        return Response(answer, status=201)


def job_body(job: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in job.items() if k != "notify_sha256"}


@extend_schema(
    summary="Report a blocking job's end with its notify token (a CI system, a watcher)",
    description="Authorization: Bearer <the job's notify token>, shown once when the job was "
                "tracked with notify: true. Scoped to that one job; idempotent (the same "
                "status again changes nothing). When the last running job of a waiting goal "
                "ends, the goal is woken at once with reason dependency_ready.",
    request=serializers.JobNotifySerializer,
    responses=responses({200: serializers.JobAnswerSerializer}, *BODY, "not_found", "job_terminal",
                        "goal_terminal", "version_conflict",
                        caller=tuple(c for c in CALLER if c != "forbidden")))
class JobNotifyView(APIView):
    # Not an API token: the job's own, checked by the domain against its digest.
    authentication_classes: list = []
    permission_classes = [AllowAny]

    def post(self, request: Request, job_id: str) -> Response:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        scheme, _, token = header.partition(" ")
        address = throttle.client_address(request)
        window = throttle.bad_tokens()
        wait = window.locked_for(address)
        if wait:
            raise Throttled(wait=wait, detail="Too many bad tokens from this address; "
                                              "see Retry-After.")
        token = token.strip() if scheme.lower() == "bearer" else ""
        if tokens.goal_of(token) is None:
            window.record(address)
            raise Problem("unauthenticated", "Send the job's notify token: "
                          "`Authorization: Bearer wlj_…`.")
        data = validated(serializers.JobNotifySerializer, request.data)
        try:
            goal, job = jobs.notify(token, job_id, status=data["status"],
                                    conclusion=data["conclusion"], link=data["link"])
        except jobs.NotMyJob:
            window.record(address)
            raise
        return Response({"job": job_body(job), "goal_id": goal})


class JobStatusView(LedgerView):
    roles = {"POST": (AGENT,)}

    @extend_schema(summary="Record a blocking job's status",
                   request=serializers.JobStatusSerializer, parameters=[IDEMPOTENCY],
                   responses=responses({200: serializers.JobAnswerSerializer}, *FENCED,
                                       "job_terminal"))
    @idempotent(serializers.JobStatusSerializer)
    def post(self, request: Request, goal_id: str, job_id: str, data: dict[str, Any]) -> Response:
        command = UpdateJob(proof(data.get("lease")), job_id, data["status"], data["conclusion"])
        state = run(request, goal_id, command).state
        return Response({"job": job_body(next(j for j in state.jobs if j["job_id"] == job_id))})


# ----------------------------------------------------------------------- failures


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
            retry_after=data["retry_after"], session=data.get("session"))
        return Response(report.as_dict())


class ApprovalsView(LedgerView):
    roles = {"POST": (AGENT,)}

    @extend_schema(summary="Ask for an approval: the goal blocks until an operator decides",
                   request=serializers.ApprovalSerializer, parameters=[IDEMPOTENCY],
                   responses=responses({200: serializers.GoalSerializer}, *FENCED))
    @idempotent(serializers.ApprovalSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        command = RequestApproval(proof(data.get("lease")), data["gate"], data["summary"])
        return Response(goal_body(run(request, goal_id, command).state))


class ResolveApprovalView(LedgerView):
    roles = {"POST": (OPERATOR,)}

    @extend_schema(summary="Approve or reject a gate (operator)",
                   request=serializers.ResolveSerializer, parameters=[IDEMPOTENCY],
                   responses=responses({200: serializers.GoalSerializer}, *WRITE))
    @idempotent(serializers.ResolveSerializer)
    def post(self, request: Request, goal_id: str, gate: str, data: dict[str, Any]) -> Response:
        acted = operators.act(data["decision"], goal_id, operator=actor(request),
                              reason=data["note"], gate=gate,
                              idempotency_key=request.idempotency_key)
        return Response(goal_body(acted.state))


class StopView(LedgerView):
    roles = {"POST": (OPERATOR,)}

    @extend_schema(summary="Stop a goal for good (operator)",
                   request=serializers.OperatorActSerializer, parameters=[IDEMPOTENCY],
                   responses=responses({200: serializers.GoalSerializer}, *WRITE))
    @idempotent(serializers.OperatorActSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        return Response(goal_body(operator_act(request, "stop", goal_id, data).state))


class RecoverView(LedgerView):
    roles = {"POST": (OPERATOR,)}

    @extend_schema(summary="Recover a blocked goal (operator); a new continuation budget",
                   request=serializers.OperatorActSerializer, parameters=[IDEMPOTENCY],
                   responses=responses({200: serializers.GoalSerializer}, *WRITE,
                                       "not_recoverable"))
    @idempotent(serializers.OperatorActSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        return Response(goal_body(operator_act(request, "recover", goal_id, data).state))


class WakeView(LedgerView):
    roles = {"POST": (OPERATOR,)}

    @extend_schema(summary="Wake a goal now (operator): ends a pause early and resumes it "
                           "as its own wake would", request=serializers.OperatorActSerializer,
                   parameters=[IDEMPOTENCY],
                   responses=responses({200: serializers.ClaimAnswerSerializer}, *WRITE,
                                       "not_wakeable"))
    @idempotent(serializers.OperatorActSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        return Response(operator_act(request, "wake", goal_id, data).claim.as_dict())


def operator_act(request: Request, act: str, goal_id: str,
                 data: dict[str, Any]) -> operators.Acted:
    return operators.act(act, goal_id, operator=actor(request), reason=data["reason"],
                         idempotency_key=request.idempotency_key)


class AlertPagination(GoalPagination):
    """GET /goals' cursor pages, oldest goal first (``ledger.alerts.ORDER``:
    created_at never changes, so a cursor never skips or repeats a goal while
    goals move), with the total every page carries."""

    ordering = alerts.ORDER
    total = 0

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        # An SQL COUNT over the very query the page is cut from.
        self.total = queryset.count()
        return super().paginate_queryset(queryset, request, view)

    def get_paginated_response(self, data: Any) -> Response:
        return Response({"count": self.total, "next": self.get_next_link(),
                         "previous": self.get_previous_link(), "results": data})


class AlertsView(LedgerView):
    @extend_schema(
        summary="Goals that need a human, oldest first, a page at a time",
        description="A cursor page (page_size, at most 200, default 50) with count, the "
                    "total of goals that need a human (the caller's own, for an agent). "
                    "Follow next until it is null to see every one.",
        operation_id="alerts_list",  # a page object, which drf-spectacular would call a retrieve
        parameters=[serializers.AlertsQuerySerializer],
        responses=responses({200: serializers.AlertPageSerializer}, *QUERY))
    def get(self, request: Request) -> Response:
        validated(serializers.AlertsQuerySerializer, request.query_params.dict())
        now = clock.now()
        paginator = AlertPagination()
        page = paginator.paginate_queryset(alerts.needing_a_human(visible_goals(request), now),
                                           request, view=self)
        return paginator.get_paginated_response([alerts.row(goal, now) for goal in page])


# ----------------------------------------------------------------------- misc


@extend_schema(exclude=True)
class SkillView(APIView):
    """The skill document for agents, with this server's URL filled in."""

    permission_classes = [AllowAny]
    authentication_classes: list = []

    def get(self, request: Request) -> HttpResponse:
        text = render_to_string("skill.md", {"base_url": siteurl.api_url(request)})
        return HttpResponse(text, content_type="text/markdown; charset=utf-8")


def health(request: HttpRequest) -> JsonResponse:
    """Liveness and database reachability, for load balancers and `make run` checks,
    and whether the scheduler still sweeps (reported, never a failed check:
    the web tier is healthy without it, and a balancer must not drop it)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    scheduler = alerts.scheduler_health()
    return JsonResponse({"status": "ok", "database": connection.vendor,
                         "scheduler": {k: scheduler[k] for k in ("status", "last_sweep_at")}})
