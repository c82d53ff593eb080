"""The verifiable log's page: what an auditor needs to know before trusting
any "verified" (docs/integrity.md, "What the admin shows"). The newest head
and checkpoint, each witness and the size it last cosigned, the seal lag and
the sealer's alarm with what it found, then the newest heads. It presents
``ledger.services.loghealth.health``; it decides nothing."""

from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path

from ledger.admin.base import ReadOnlyAdmin
from ledger.models import TreeHead
from ledger.services import loghealth

NEWEST_HEADS = 20


@admin.register(TreeHead)
class LogAdmin(ReadOnlyAdmin):
    def get_urls(self) -> list:
        # The heads' list is the log's page (its changelist's URL as well).
        return [path("", self.admin_site.admin_view(self.log_view), name="ledger_log"),
                *super().get_urls()]

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None
                        ) -> HttpResponse:
        return self.log_view(request)

    def log_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        health = loghealth.health()
        heads = list(TreeHead.objects.order_by("-id")[:NEWEST_HEADS])
        context = {**self.admin_site.each_context(request), "title": "Verifiable log",
                   "opts": self.model._meta, "health": health, "heads": heads,
                   "problems": health.problems,
                   "max_lag_minutes": settings.WAKELEDGER_WITNESS_MAX_LAG_MINUTES}
        return TemplateResponse(request, "admin/ledger/treehead/log.html", context)
