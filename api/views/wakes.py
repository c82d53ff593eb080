"""Wakes: the goal's one watchdog (ensure, cancel), the host's receipts for
it, and a host-fired task's claim."""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from api import serializers
from api.auth import caller
from api.digests import host_ref_digest
from api.idempotency import idempotent, lease_token
from api.schema import responses
from api.serializers import validated
from api.views.common import (
    FENCED,
    FENCED_BODY,
    IDEMPOTENCY,
    WRITE,
    LedgerView,
    api_url,
)
from ledger.access.accounts import AGENT
from ledger.services import wakes, watchdogs
from ledger.services.tokens import proof


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
        answer = watchdogs.ensure(caller(request), goal_id, proof(data.get("lease")),
                                  tzid=data["tzid"], api_url=api_url(request))
        return Response(answer.as_dict())

    @extend_schema(summary="Cancel the watchdog", request=serializers.FencedSerializer,
                   responses=responses({200: serializers.WatchdogAnswerSerializer}, *FENCED_BODY))
    def delete(self, request: Request, goal_id: str) -> Response:
        data = validated(serializers.FencedSerializer, request.data)
        answer = watchdogs.cancel(caller(request), goal_id, proof(data.get("lease")),
                                  api_url=api_url(request))
        return Response(answer.as_dict())


class ReceiptsView(LedgerView):
    roles = {"POST": (AGENT,)}

    @extend_schema(summary="Record what the host did with the watchdog",
                   request=serializers.ReceiptSerializer, parameters=[IDEMPOTENCY],
                   responses=responses({200: serializers.WatchdogAnswerSerializer}, *FENCED))
    @idempotent(serializers.ReceiptSerializer)
    def post(self, request: Request, goal_id: str, data: dict[str, Any]) -> Response:
        ref = data["host_ref"]
        answer = watchdogs.receipt(
            caller(request), goal_id, proof(data.get("lease")), status=data["status"],
            # Host task ids are stored as digests only.
            host_ref_sha256=host_ref_digest(ref) if ref else "",
            due_at=data["due_at"], runs_on=data["runs_on"], verified=data["verified"],
            attested_by=data["attested_by"], note=data["note"], api_url=api_url(request))
        return Response(answer.as_dict())


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
        result = wakes.host_claim(caller(request), goal_id,
                                  occurrence_id=data.get("occurrence_id") or "",
                                  reason=data.get("reason", ""), token=lease_token(request))
        return Response(result.as_dict())
