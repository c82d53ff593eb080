"""``/metrics``: the ledger's numbers in Prometheus' text format (docs/metrics.md).

For an auditor's or operator's API token, or the scrape token of its own
(``WAKELEDGER_METRICS_TOKEN``, compared in constant time), so a Prometheus
needs no user account. Mounted at the site's root (``ledger/project/urls.py``
includes this module by name), beside /api/v1/ rather than in it: that is
where scrapers look. What is reported and what a scrape costs:
``ledger.operators.metrics``.
"""

import secrets
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from django.urls import path
from drf_spectacular.utils import extend_schema
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from rest_framework import authentication
from rest_framework.request import Request
from rest_framework.views import APIView

from api.auth import BearerTokenAuthentication, HasRole
from api.problems import CHALLENGE
from ledger.access.accounts import AUDITOR, OPERATOR
from ledger.operators import metrics

SCRAPER = "metrics-scraper"


class ScrapeTokenAuthentication(authentication.BaseAuthentication):
    """The scrape token, before the API tokens are looked at (so a scrape
    token never counts as a bad API token in their throttle)."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        expected = settings.WAKELEDGER_METRICS_TOKEN
        scheme, _, token = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
        if not expected or scheme.lower() != "bearer":
            return None
        if secrets.compare_digest(token.strip().encode(), expected.encode()):
            return _Scraper(), SCRAPER
        return None  # perhaps an API token: the next authenticator decides

    def authenticate_header(self, request: Request) -> str:
        return CHALLENGE  # DRF asks the first authenticator: 401 with a challenge


class _Scraper:
    """The scrape token's caller: authenticated, no user, no role."""

    is_authenticated = True
    is_active = True
    is_superuser = False

    def get_username(self) -> str:
        return SCRAPER


class MayScrape(HasRole):
    message = "Metrics are for an auditor's or operator's token, or the scrape token."

    def has_permission(self, request: Request, view: Any) -> bool:
        return request.auth == SCRAPER or super().has_permission(request, view)


@extend_schema(exclude=True)
class MetricsView(APIView):
    authentication_classes = [ScrapeTokenAuthentication, BearerTokenAuthentication]
    permission_classes = [MayScrape]
    roles = {"GET": (AUDITOR, OPERATOR)}

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # The answer is Prometheus' text whatever Accept says (a scraper
        # asking for text/plain only must not get 406); a refusal is the
        # API's problem JSON.
        return super().perform_content_negotiation(request, force=True)

    def get(self, request: Request) -> HttpResponse:
        body = generate_latest(metrics.registry())
        return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


urlpatterns = [path("metrics", MetricsView.as_view(), name="metrics")]
