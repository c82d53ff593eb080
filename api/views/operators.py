"""Approvals (asked by the agent, decided by an operator) and the operator's
acts: stop, recover, wake now."""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from api import serializers
from api.auth import actor, caller
from api.idempotency import idempotent
from api.schema import responses
from api.views.common import FENCED, IDEMPOTENCY, WRITE, LedgerView
from ledger.access.accounts import AGENT, OPERATOR
from ledger.services import operators, work
from ledger.services.tokens import proof


class ApprovalsView(LedgerView):
    roles = {"POST": (AGENT,)}

    @extend_schema(summary="Ask for an approval: the goal blocks until an operator decides",
                   request=serializers.ApprovalSerializer, parameters=[IDEMPOTENCY],
                   responses=responses({200: serializers.GoalSerializer}, *FENCED))
    @idempotent(serializers.ApprovalSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        answer = work.request_approval(caller(request), goal_id, proof(data.get("lease")),
                                       gate=data["gate"], summary=data["summary"])
        return Response(answer.as_dict())


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
        return Response(acted.as_dict())


def operator_act(request: Request, act: str, goal_id: str,
                 data: dict[str, Any]) -> operators.Acted:
    return operators.act(act, goal_id, operator=actor(request), reason=data["reason"],
                         idempotency_key=request.idempotency_key)


class StopView(LedgerView):
    roles = {"POST": (OPERATOR,)}

    @extend_schema(summary="Stop a goal for good (operator)",
                   request=serializers.OperatorActSerializer, parameters=[IDEMPOTENCY],
                   responses=responses({200: serializers.GoalSerializer}, *WRITE))
    @idempotent(serializers.OperatorActSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        return Response(operator_act(request, "stop", goal_id, data).as_dict())


class RecoverView(LedgerView):
    roles = {"POST": (OPERATOR,)}

    @extend_schema(summary="Recover a blocked goal (operator); a new continuation budget",
                   request=serializers.OperatorActSerializer, parameters=[IDEMPOTENCY],
                   responses=responses({200: serializers.GoalSerializer}, *WRITE,
                                       "not_recoverable"))
    @idempotent(serializers.OperatorActSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        return Response(operator_act(request, "recover", goal_id, data).as_dict())


class WakeView(LedgerView):
    roles = {"POST": (OPERATOR,)}

    @extend_schema(summary="Wake a goal now (operator): ends a pause early and resumes it "
                           "as its own wake would", request=serializers.OperatorActSerializer,
                   parameters=[IDEMPOTENCY],
                   responses=responses({200: serializers.ClaimAnswerSerializer}, *WRITE,
                                       "not_wakeable"))
    @idempotent(serializers.OperatorActSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        return Response(operator_act(request, "wake", goal_id, data).as_dict())
