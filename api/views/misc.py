"""Who needs a human (/alerts), the skill document, and the health check."""

from typing import Any

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api import serializers
from api.auth import caller
from api.schema import QUERY, responses
from api.serializers import validated
from api.views.common import GoalPagination, LedgerView
from ledger.eventstore import clock
from ledger.project import siteurl
from ledger.services import alerts, reads


class AlertPagination(GoalPagination):
    """GET /goals' cursor pages, oldest goal first (``ledger.services.alerts.ORDER``:
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
        page = paginator.paginate_queryset(
            alerts.needing_a_human(reads.visible_goals(caller(request)), now), request,
            view=self)
        return paginator.get_paginated_response([alerts.row(goal, now) for goal in page])


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
