"""The admin for auditors and operators.

Read-only for everyone (superusers included): nobody adds, changes or deletes
a goal or an event here; state changes only through domain commands that
append events. A goal's page is its timeline; operators (and superusers) get
actions on it — stop, recover, approve/reject a gate, replay — each through the
same domain command as the API, with their name and a reason.
"""

import json
import uuid
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.functional import cached_property
from django.utils.html import format_html

from api.roles import OPERATOR, role_of
from ledger import projection, store, timeline
from ledger.domain import DomainError, GoalState
from ledger.domain.runs import Recover, ResolveApproval, Stop
from ledger.domain.wakes import watchdog_health
from ledger.models import Event, Goal
from ledger.terminal import summary


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


class UUIDSearchMixin:
    """Search by a goal id without letting a non-UUID term reach a UUID lookup."""

    uuid_field = "pk"

    def get_search_results(self, request: HttpRequest, queryset: QuerySet,
                           search_term: str) -> tuple[QuerySet, bool]:
        try:
            goal_id = uuid.UUID(search_term.strip())
        except ValueError:
            return super().get_search_results(request, queryset, search_term)
        return queryset.filter(**{self.uuid_field: goal_id}), False


def is_operator(request: HttpRequest) -> bool:
    return role_of(request.user) == OPERATOR


class ReasonForm(forms.Form):
    reason = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 3}),
                             help_text="Recorded with your name in the goal's history.")


@admin.register(Goal)
class GoalAdmin(UUIDSearchMixin, ReadOnlyAdmin):
    list_display = ("goal_key", "workspace", "status_badge", "reason", "agent", "progress",
                    "updated_at")
    list_filter = ("status", "reason", "agent", ("updated_at", admin.DateFieldListFilter))
    search_fields = ("goal_key", "workspace")
    ordering = ("-updated_at",)
    list_display_links = ("goal_key",)

    @admin.display(description="status", ordering="status")
    def status_badge(self, goal: Goal) -> str:
        return format_html('<span class="wl-badge wl-{}">{}</span>', goal.status, goal.status)

    @admin.display(description="progress")
    def progress(self, goal: Goal) -> str:
        return f"{goal.state.get('progress_pct', 0)} %"

    def get_urls(self) -> list:
        view = self.admin_site.admin_view
        return [
            path("dashboard/", view(self.dashboard_view), name="ledger_goal_dashboard"),
            path("<uuid:goal_id>/timeline/", view(self.timeline_view),
                 name="ledger_goal_timeline"),
            path("<uuid:goal_id>/act/<str:action>/", view(self.act_view),
                 name="ledger_goal_act"),
            *super().get_urls(),
        ]

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict | None = None) -> HttpResponse:
        # A goal's page is its timeline.
        return HttpResponseRedirect(reverse("admin:ledger_goal_timeline", args=[object_id]))

    # ------------------------------------------------------------------ timeline

    def timeline_view(self, request: HttpRequest, goal_id: uuid.UUID) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        goal = get_object_or_404(Goal, pk=goal_id)
        state = GoalState.from_dict(goal.state)
        cursor = {name: _int(request.GET.get(name)) for name in ("before", "after")}
        page = timeline.page(goal, **cursor)
        full = None
        if request.GET.get("verify") == "all":
            [full] = projection.verify([str(goal.pk)])
        rows = [{"event": e, "summary": summary(e.kind, e.data),
                 "raw": json.dumps(e.data, indent=2, sort_keys=True, ensure_ascii=False),
                 "icon": timeline.style(e.kind)[0], "colour": timeline.style(e.kind)[1]}
                for e in page.events]
        context = {
            **self.admin_site.each_context(request),
            "title": f"{goal.goal_key} — timeline",
            "opts": self.model._meta,
            "goal": goal,
            "state": state,
            "watchdog_health": watchdog_health(state),
            "page": page,
            "rows": rows,
            "chart": timeline.chart(goal),
            "full_verification": full,
            "operator": is_operator(request),
            "running_jobs": state.running_jobs(),
        }
        return TemplateResponse(request, "admin/ledger/goal/timeline.html", context)

    # ------------------------------------------------------------------ dashboard

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {**self.admin_site.each_context(request), "title": "Stuck goals",
                   "opts": self.model._meta, "groups": timeline.stuck_goals()}
        return TemplateResponse(request, "admin/ledger/goal/dashboard.html", context)

    # ------------------------------------------------------------------ operator acts

    ACTIONS = ("stop", "recover", "approve", "reject", "replay")

    def act_view(self, request: HttpRequest, goal_id: uuid.UUID, action: str) -> HttpResponse:
        if not is_operator(request) or action not in self.ACTIONS:
            raise PermissionDenied
        goal = get_object_or_404(Goal, pk=goal_id)
        gate = request.GET.get("gate") or request.POST.get("gate") or ""
        back = reverse("admin:ledger_goal_timeline", args=[goal.pk])
        if action == "replay":
            [report] = list(projection.replay([str(goal.pk)])) or [None]
            if request.method == "POST":
                list(projection.replay([str(goal.pk)], fix=True))
                self.message_user(request, "Projection rewritten from the events.")
                return HttpResponseRedirect(back)
            form = None
        else:
            report = None
            form = ReasonForm(request.POST or None)
            if request.method == "POST" and form.is_valid():
                return self._act(request, goal, action, gate, form.cleaned_data["reason"], back)
        context = {**self.admin_site.each_context(request), "opts": self.model._meta,
                   "title": f"{action.title()} {goal.goal_key}", "goal": goal,
                   "action": action, "gate": gate, "form": form, "report": report}
        return TemplateResponse(request, "admin/ledger/goal/act.html", context)

    def _act(self, request: HttpRequest, goal: Goal, action: str, gate: str, reason: str,
             back: str) -> HttpResponse:
        operator = request.user.get_username()
        command = {
            "stop": lambda: Stop(operator, reason),
            "recover": lambda: Recover(operator, reason),
            "approve": lambda: ResolveApproval(gate, "approve", operator, reason),
            "reject": lambda: ResolveApproval(gate, "reject", operator, reason),
        }[action]()
        try:
            state = store.execute(goal.pk, command, actor=operator).state
        except DomainError as error:
            self.message_user(request, f"Refused ({error.code}): {error.detail}",
                              messages.ERROR)
        else:
            self.message_user(request, f"{action}: the goal is now {state.status}"
                              + (f"/{state.reason}" if state.reason else ""))
        return HttpResponseRedirect(back)


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class KindFilter(admin.SimpleListFilter):
    """Event kinds from the catalogue, not a DISTINCT over millions of rows."""

    title = "kind"
    parameter_name = "kind"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        from ledger.domain import events

        kinds = sorted(value for name, value in vars(events).items()
                       if name.isupper() and isinstance(value, str) and "." in value)
        return [(kind, kind) for kind in kinds]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(kind=self.value()) if self.value() else queryset


@admin.register(Event)
class EventAdmin(UUIDSearchMixin, ReadOnlyAdmin):
    uuid_field = "goal_id"
    list_display = ("id", "goal_link", "seq", "kind", "actor", "recorded_at")
    list_filter = (KindFilter, ("recorded_at", admin.DateFieldListFilter))
    list_select_related = ("goal",)
    search_fields = ("goal__goal_key", "actor")
    ordering = ("-id",)

    @admin.display(description="goal")
    def goal_link(self, event: Event) -> str:
        url = reverse("admin:ledger_goal_timeline", args=[event.goal_id])
        return format_html('<a href="{}#seq-{}">{}</a>', url, event.seq, event.goal.goal_key)
