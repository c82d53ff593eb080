"""Read-only admin for auditors: nobody adds, changes or deletes a goal or an
event here (superusers included). State changes only through commands that
append events."""

from typing import Any

from django.contrib import admin
from django.core.paginator import Paginator
from django.http import HttpRequest
from django.utils.functional import cached_property

from ledger.models import Event, Goal


class NoCountPaginator(Paginator):
    """The changelist never runs COUNT(*) over the whole table: on a ledger of
    millions of events that count alone takes seconds."""

    @cached_property
    def count(self) -> int:
        return 10_000_000


class ReadOnlyAdmin(admin.ModelAdmin):
    show_full_result_count = False
    paginator = NoCountPaginator
    list_per_page = 50

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Goal)
class GoalAdmin(ReadOnlyAdmin):
    list_display = ("goal_key", "workspace", "status", "reason", "agent", "version", "updated_at")
    list_filter = ("status", "reason")
    search_fields = ("=id", "goal_key", "workspace")
    ordering = ("-updated_at",)


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("id", "goal", "seq", "kind", "actor", "recorded_at")
    list_filter = ("kind",)
    list_select_related = ("goal",)
    search_fields = ("=goal__id", "goal__goal_key")
    ordering = ("-id",)
