"""Blocking jobs: tracked and updated by the goal's agent, or ended by
whoever holds the job's notify token (a CI system, a watcher)."""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import Throttled
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api import serializers
from api.auth import caller
from api.idempotency import idempotent
from api.problems import Problem
from api.schema import BODY, CALLER, responses
from api.serializers import validated
from api.views.common import FENCED, IDEMPOTENCY, LedgerView
from ledger.access import accounts
from ledger.access.accounts import AGENT
from ledger.services import jobs, tokens
from ledger.services.tokens import proof


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
        return Response(tracked.as_dict(), status=201)


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
        address = accounts.client_address(request)
        window = accounts.bad_tokens()
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
            answer = jobs.notify(token, job_id, status=data["status"],
                                 conclusion=data["conclusion"], link=data["link"])
        except jobs.NotMyJob:
            window.record(address)
            raise
        return Response(answer)


class JobStatusView(LedgerView):
    roles = {"POST": (AGENT,)}

    @extend_schema(summary="Record a blocking job's status",
                   request=serializers.JobStatusSerializer, parameters=[IDEMPOTENCY],
                   responses=responses({200: serializers.JobAnswerSerializer}, *FENCED,
                                       "job_terminal"))
    @idempotent(serializers.JobStatusSerializer)
    def post(self, request: Request, goal_id: str, job_id: str, data: dict[str, Any]) -> Response:
        return Response(jobs.update(caller(request), goal_id, proof(data.get("lease")), job_id,
                                    status=data["status"], conclusion=data["conclusion"]))
