"""Goals: list, start or resume (run_goal), read one, its checkpoint
contract, its resume packet, its events."""

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from api import serializers
from api.auth import caller
from api.idempotency import idempotent, lease_token
from api.schema import BODY, GOAL, IDEMPOTENT, QUERY, responses
from api.serializers import validated
from api.views.common import IDEMPOTENCY, READERS, GoalPagination, LedgerView
from ledger.access.accounts import AGENT
from ledger.services import goals, reads


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
        rows = reads.filtered(caller(request), **{name: filters[name] for name in (
            "status", "reason", "agent", "workspace") if name in filters})
        paginator = GoalPagination()
        page = paginator.paginate_queryset(rows.only("id", "created_at", "state"), request,
                                           view=self)
        return paginator.get_paginated_response(reads.bodies(page))

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
        return Response(answer.as_dict(), status=201 if answer.created else 200)


class GoalView(LedgerView):
    @extend_schema(summary="A goal's projected state",
                   responses=responses({200: serializers.GoalSerializer}, *GOAL))
    def get(self, request: Request, goal_id: str) -> Response:
        return Response(reads.goal(caller(request), goal_id))


class CheckpointContractView(LedgerView):
    @extend_schema(summary="The smart-wake checkpoint contract",
                   responses=responses({200: serializers.CheckpointContractSerializer}, *GOAL))
    def get(self, request: Request, goal_id: str) -> Response:
        return Response(reads.contract(caller(request), goal_id))


class ResumeView(LedgerView):
    @extend_schema(summary="The resume packet: where to pick up, exactly",
                   responses=responses({200: serializers.ResumePacketSerializer}, *GOAL))
    def get(self, request: Request, goal_id: str) -> Response:
        return Response(reads.resume(caller(request), goal_id))


class EventsView(LedgerView):
    @extend_schema(summary="A goal's history, in seq order",
                   parameters=[serializers.EventsQuerySerializer],
                   responses=responses({200: serializers.EventPageSerializer}, *GOAL, *QUERY))
    def get(self, request: Request, goal_id: str) -> Response:
        query = validated(serializers.EventsQuerySerializer, request.query_params.dict())
        page = reads.events(caller(request), goal_id, after=query["after"], limit=query["limit"])
        return Response(page.as_dict())
