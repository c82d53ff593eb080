"""The events' admin: every event, read-only, filtered by kind."""


from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from ledger.admin.base import (
    ReadOnlyAdmin,
    UUIDSearchMixin,
    utc,
    wrapped,
)
from ledger.domain.vocabulary import EVENT_KINDS
from ledger.models import Event, of_kind
from ledger.operators.summaries import summary


class KindFilter(admin.SimpleListFilter):
    """Event kinds from the catalogue, not a DISTINCT over millions of rows."""

    title = "kind"
    parameter_name = "kind"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(kind, kind) for kind in EVENT_KINDS]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(of_kind(self.value())) if self.value() else queryset


@admin.register(Event)
class EventAdmin(UUIDSearchMixin, ReadOnlyAdmin):
    uuid_field = "goal_id"
    list_display = ("id", "goal_prefix", "goal_link", "seq", "kind", "event_summary", "actor",
                    "recorded")
    list_filter = (KindFilter, ("recorded_at", admin.DateFieldListFilter))
    list_select_related = ("goal",)
    search_fields = ("goal__goal_key", "actor")
    ordering = ("-id",)

    @admin.display(description="goal id", ordering="goal_id")
    def goal_prefix(self, event: Event) -> str:
        return format_html('<span class="wl-id" title="{}">{}</span>', event.goal_id,
                           event.goal_id.hex[:8])

    @admin.display(description="goal")
    def goal_link(self, event: Event) -> str:
        url = reverse("admin:ledger_goal_timeline", args=[event.goal_id])
        return format_html('<a href="{}#seq-{}">{}</a>', url, event.seq, event.goal.goal_key)

    @admin.display(description="summary")
    def event_summary(self, event: Event) -> str:
        # The timeline's one-line reading of the event (ledger/operators/terminal.py).
        return wrapped(summary(event.kind, event.data))

    @admin.display(description="recorded (UTC)", ordering="id")
    def recorded(self, event: Event) -> str:
        # Sorted by id: ids grow with time, and recorded_at has no index.
        return utc(event.recorded_at)


# ---------------------------------------------------------------- the site
