"""The admin for auditors and operators.

Read-only for everyone (superusers included): nobody adds, changes or deletes
a goal or an event here; state changes only through domain commands that
append events. A goal's page is its timeline; operators (and superusers) get
actions on it — stop, recover, approve/reject a gate, replay — each through the
same domain command as the API, with their name and a reason, offered only
when the domain would accept it. Lists count boundedly and say so. Superusers
edit accounts (users, groups) and nothing else; django-q2's models are shown
read-only, since goal schedules belong to goals.
"""

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.views.main import PAGE_VAR
from django.contrib.auth.admin import GroupAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse, reverse_lazy
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.http import urlencode

from ledger.access.accounts import OPERATOR, ROLES, role_of
from ledger.domain import DomainError, GoalState
from ledger.domain.vocabulary import EVENT_KINDS, TERMINAL_STATUSES, WHY
from ledger.eventstore import clock, projection
from ledger.log import export
from ledger.models import Event, Goal
from ledger.operators import alerts, goalids, timeline
from ledger.operators.terminal import summary
from ledger.services import operators
from ledger.services.bodies import Standing


class BoundedCountPaginator(Paginator):
    """Counts at most ``limit`` + 1 rows (``SELECT COUNT(*)`` over a
    ``LIMIT``ed subquery), so a changelist over millions of events costs a
    bounded count, and every number it shows is true: the exact count when
    there are at most ``limit`` rows, otherwise "more than ``limit``" — with
    pages offered only as far as rows are known to exist."""

    def __init__(self, object_list: QuerySet, per_page: int, orphans: int = 0,
                 allow_empty_first_page: bool = True, *, limit: int) -> None:
        super().__init__(object_list, per_page, orphans, allow_empty_first_page)
        self.limit = limit

    @cached_property
    def count(self) -> int:
        return self.object_list[: self.limit + 1].count()

    @property
    def capped(self) -> bool:
        """True when there are more than ``limit`` rows (how many more is not known)."""
        return self.count > self.limit

    @cached_property
    def estimate(self) -> int | None:
        """PostgreSQL's planner estimate of an unfiltered list's rows (its
        table's ``pg_class.reltuples``), shown as "about" next to a capped
        count; None when filtered, not PostgreSQL, or never analysed."""
        query = self.object_list.query
        connection = connections[self.object_list.db]
        if not self.capped or query.where or connection.vendor != "postgresql":
            return None
        with connection.cursor() as cursor:
            cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)",
                           [connection.ops.quote_name(self.object_list.model._meta.db_table)])
            row = cursor.fetchone()
        return row[0] if row and row[0] > self.limit else None


class ReadOnlyAdmin(admin.ModelAdmin):
    show_full_result_count = False  # its COUNT(*) is unbounded
    show_facets = admin.ShowFacets.NEVER  # so are the facets' counts
    list_per_page = 50
    count_limit = 10_000  # rows a changelist counts exactly, at the least
    # Page links the changelist shows after the current page (Django's
    # get_elided_page_range: 3 on each side, then the last 2).
    PAGES_AHEAD = 3

    def get_paginator(self, request: HttpRequest, queryset: QuerySet, per_page: int,
                      orphans: int = 0, allow_empty_first_page: bool = True
                      ) -> BoundedCountPaginator:
        # Count far enough to know that each page linked from the current one
        # has rows (a deep page costs its OFFSET anyway), and past "show all"'s
        # ceiling, so a capped list never offers to show all its rows.
        page = max(_int(request.GET.get(PAGE_VAR)) or 1, 1)
        limit = max(self.count_limit, self.list_max_show_all,
                    (page + self.PAGES_AHEAD) * per_page)
        return BoundedCountPaginator(queryset, per_page, orphans, allow_empty_first_page,
                                     limit=limit)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class UUIDSearchMixin:
    """Search by a goal id, or by the first hex digits of one (what the lists
    and `ledger goals` print), without letting a non-UUID term reach a UUID
    lookup. Other terms search the text fields as usual."""

    uuid_field = "pk"

    def get_search_results(self, request: HttpRequest, queryset: QuerySet,
                           search_term: str) -> tuple[QuerySet, bool]:
        try:
            goal_id = uuid.UUID(search_term.strip())
        except ValueError:
            pass
        else:
            return queryset.filter(**{self.uuid_field: goal_id}), False
        if goalids.prefix_of(search_term) is not None:
            ids = goalids.matching(search_term)
            by_text, duplicates = super().get_search_results(  # type: ignore[misc]
                request, queryset, search_term)
            return (queryset.filter(**{f"{self.uuid_field}__in": ids}) | by_text), duplicates
        return super().get_search_results(request, queryset, search_term)  # type: ignore[misc]


def is_operator(request: HttpRequest) -> bool:
    return role_of(request.user) == OPERATOR


class ReasonForm(forms.Form):
    reason = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 3}),
                             help_text="Recorded with your name in the goal's history.")


def utc(moment: datetime | None) -> str:
    """An instant as every list shows it: UTC to the second, like the timeline."""
    if moment is None:
        return "—"
    at = moment.astimezone(UTC)
    # Two unbreakable halves, so a narrow column wraps between date and time.
    return format_html('<time class="wl-time" datetime="{}"><span>{}</span> <span>{} UTC</span>'
                       '</time>', at.isoformat(), at.strftime("%Y-%m-%d"),
                       at.strftime("%H:%M:%S"))


def cut(text: str, *, width: str = "") -> str:
    """A long text cut to its column's width (CSS: "", "short" or "long"),
    the whole of it in the title."""
    return format_html('<span class="wl-cut{}" title="{}">{}</span>',
                       f" wl-cut-{width}" if width else "", text, text)


class NeedsHumanFilter(admin.SimpleListFilter):
    """The goals GET /alerts lists (``ledger.operators.alerts``: one query), by reason:
    where the dashboard sends a human for the goals it does not show."""

    title = "needs a human"
    parameter_name = "needs_human"
    ANY = "any"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        # The reasons the domain explains, not a count over the goals: the
        # list's counts stay bounded (the dashboard counts per reason). Any
        # other reason still filters, by its URL (the dashboard's links).
        return [(self.ANY, "any reason"), *((reason, reason) for reason in sorted(WHY))]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if not self.value():
            return queryset
        now = clock.now()
        if self.value() == self.ANY:
            return alerts.needing_a_human(queryset, now)
        return alerts.of_reason(queryset, self.value(), now)


@admin.register(Goal)
class GoalAdmin(UUIDSearchMixin, ReadOnlyAdmin):
    # What an auditor looks a goal up by (the id prefix `ledger goals` prints,
    # its key and objective) and what tells whether it moves (who holds it,
    # when it wakes), every time in UTC to the second and sortable.
    list_display = ("short_id", "goal_key", "objective", "workspace_cut", "status_badge",
                    "agent", "lease_holder", "progress", "next_wake", "updated")
    list_filter = ("status", "reason", NeedsHumanFilter, "agent",
                   ("updated_at", admin.DateFieldListFilter))
    search_fields = ("goal_key", "workspace")
    ordering = ("-updated_at",)
    list_display_links = ("short_id", "goal_key")

    @admin.display(description="id", ordering="id")
    def short_id(self, goal: Goal) -> str:
        return format_html('<span class="wl-id" title="{}">{}</span>', goal.pk,
                           goal.pk.hex[:8])

    @admin.display(description="objective")
    def objective(self, goal: Goal) -> str:
        return cut(goal.state.get("objective", ""))

    @admin.display(description="workspace", ordering="workspace")
    def workspace_cut(self, goal: Goal) -> str:
        return cut(goal.workspace, width="short")

    @admin.display(description="status, reason", ordering="status")
    def status_badge(self, goal: Goal) -> str:
        # The reason under its status, not a column of its own: the list
        # then fits a 1400 px window (the reason filter is on the right).
        badge = format_html('<span class="wl-badge wl-{}">{}</span>', goal.status, goal.status)
        if not goal.reason:
            return badge
        return format_html('{}<br><span class="wl-reason">{}</span>', badge, goal.reason)

    @admin.display(description="holder")
    def lease_holder(self, goal: Goal) -> str:
        return (goal.state.get("lease") or {}).get("holder") or "—"

    @admin.display(description="%")
    def progress(self, goal: Goal) -> str:
        return f"{goal.state.get('progress_pct', 0)}\u00a0%"  # never "40" over "%"

    @admin.display(description="next wake", ordering="next_wake_at")
    def next_wake(self, goal: Goal) -> str:
        return utc(goal.next_wake_at)

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, goal: Goal) -> str:
        return utc(goal.updated_at)

    def get_urls(self) -> list:
        view = self.admin_site.admin_view
        return [
            path("dashboard/", view(self.dashboard_view), name="ledger_goal_dashboard"),
            # <str:…>, not <uuid:…>: a typed prefix reaches the view, which
            # opens its goal, lists the several it matches, or answers 404.
            path("<str:goal_id>/timeline/", view(self.timeline_view),
                 name="ledger_goal_timeline"),
            path("<str:goal_id>/act/<str:action>/", view(self.act_view),
                 name="ledger_goal_act"),
            path("<uuid:goal_id>/export/", view(self.export_view),
                 name="ledger_goal_export"),
            *super().get_urls(),
        ]

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict | None = None) -> HttpResponse:
        # A goal's page is its timeline (a prefix, garbage: the timeline decides).
        if not self.has_view_permission(request):
            raise PermissionDenied
        found = self._goal_or_answer(request, object_id, "admin:ledger_goal_timeline")
        if isinstance(found, HttpResponse):
            return found
        return HttpResponseRedirect(reverse("admin:ledger_goal_timeline", args=[found.pk]))

    def _goal_or_answer(self, request: HttpRequest, typed: str, view: str,
                        *extra: str) -> Goal | HttpResponse:
        """The goal a URL names, or the answer to give instead: a redirect to
        the full id's page for a unique prefix, the goal list searched by the
        prefix (with a message) when it matches several, 404 otherwise."""
        try:
            goal_id = goalids.resolve(typed)
        except goalids.AmbiguousGoal as error:
            self.message_user(request, str(error), messages.WARNING)
            query = urlencode({"q": typed})
            return HttpResponseRedirect(f"{reverse('admin:ledger_goal_changelist')}?{query}")
        except (goalids.NotAGoalId, goalids.NoSuchGoal):
            raise Http404("No goal has this id") from None
        if goal_id != typed:
            target = reverse(view, args=[goal_id, *extra])
            query = request.GET.urlencode()
            return HttpResponseRedirect(f"{target}?{query}" if query else target)
        return get_object_or_404(Goal, pk=goal_id)

    # ------------------------------------------------------------------ timeline

    def timeline_view(self, request: HttpRequest, goal_id: str) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        goal = self._goal_or_answer(request, goal_id, "admin:ledger_goal_timeline")
        if isinstance(goal, HttpResponse):
            return goal
        state = GoalState.from_dict(goal.state)
        cursor = {name: _int(request.GET.get(name)) for name in ("before", "after")}
        page = timeline.page(goal, **cursor)
        full = None
        if request.GET.get("verify") == "all":
            [full] = projection.verify([str(goal.pk)])
        rows = [{"event": e, "summary": summary(e.kind, e.data),
                 "raw": json.dumps(e.data, indent=2, sort_keys=True, ensure_ascii=False),
                 "icon": timeline.icon(e.kind)}
                for e in page.events]
        operator = is_operator(request)
        me = request.user.get_username()
        offer = operators.refusals(state, me) if operator else {}
        standing = Standing.of(state, clock.now())
        context = {
            **self.admin_site.each_context(request),
            "title": f"{goal.goal_key} — timeline",
            "opts": self.model._meta,
            "goal": goal,
            "state": state,
            "watchdog_health": standing.watchdog_health,
            # Liveness (ledger.domain.liveness): the same label, evidence and
            # alert as the API, /alerts and the dashboard (services.bodies).
            "liveness": standing.liveness,
            "expected": standing.expected,
            "alert": standing.alert,
            "page": page,
            "rows": rows,
            "chart": timeline.chart(goal),
            "full_verification": full,
            "operator": operator,
            "refusals": offer,
            # An ended goal the domain refuses every action on gets one line,
            # not a refusal per action (a failed AUTH_FAILED goal still offers
            # recover, so this asks the refusals rather than the status).
            "ended": state.status in TERMINAL_STATUSES and not any(
                refusal is None for refusal in offer.values()),
            "header": timeline.header(goal),
            # Approve/reject a gate: offered while the domain would resolve it.
            "gates": [{**gate, "offered": operator and operators.refusal(
                state, "approve", me, gate["gate"]) is None}
                for gate in state.pending_approvals],
            "running_jobs": state.running_jobs(),
        }
        return TemplateResponse(request, "admin/ledger/goal/timeline.html", context)

    def export_view(self, request: HttpRequest, goal_id: uuid.UUID) -> HttpResponse:
        """The goal's verifiable export (docs/integrity.md), as a download. Against
        the newest signed head as it is: a GET never seals (the scheduler does,
        every minute)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        goal = get_object_or_404(Goal, pk=goal_id)
        try:
            bundle = export.bundle(str(goal.pk))
        except export.NothingToExport as error:
            messages.warning(request, f"No verifiable export yet: {error}.")
            return HttpResponseRedirect(reverse("admin:ledger_goal_timeline", args=[goal.pk]))
        response = HttpResponse(json.dumps(bundle, indent=1, sort_keys=True,
                                           ensure_ascii=False) + "\n",
                                content_type="application/json")
        response["Content-Disposition"] = (
            f'attachment; filename="wakeledger-export-{goal.pk}.json"')
        return response

    # ------------------------------------------------------------------ dashboard

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {**self.admin_site.each_context(request), "title": "Stuck goals",
                   "opts": self.model._meta, "sections": self.dashboard_sections()}
        return TemplateResponse(request, "admin/ledger/goal/dashboard.html", context)

    def dashboard_sections(self) -> list[dict[str, Any]]:
        """The dashboard's sections, in order: each an id, a heading, the
        template that draws it and what that template needs. A new kind of
        list (a liveness check, say) is one more entry and one template."""
        return [{"id": "stuck", "title": "Goals needing attention",
                 "template": "admin/ledger/goal/dashboard_stuck.html",
                 "groups": timeline.stuck_goals(), "scheduler": alerts.scheduler_health()}]

    # ------------------------------------------------------------------ operator acts

    ACTIONS = ("stop", "recover", "wake", "approve", "reject", "replay")

    def act_view(self, request: HttpRequest, goal_id: str, action: str) -> HttpResponse:
        if not is_operator(request) or action not in self.ACTIONS:
            raise PermissionDenied
        if request.method == "POST":  # a POST acts on exactly the goal it names
            goal = get_object_or_404(Goal, pk=_uuid_or_404(goal_id))
        else:
            found = self._goal_or_answer(request, goal_id, "admin:ledger_goal_act", action)
            if isinstance(found, HttpResponse):
                return found
            goal = found
        gate = request.GET.get("gate") or request.POST.get("gate") or ""
        back = reverse("admin:ledger_goal_timeline", args=[goal.pk])
        refusal = None
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
            # No form for what the domain would refuse now (a stale page, a
            # typed URL); a POST still goes through the domain, which decides.
            state = GoalState.from_dict(goal.state)
            refusal = operators.refusal(state, action, request.user.get_username(), gate)
            if refusal and request.method != "POST":
                form = None
        context = {**self.admin_site.each_context(request), "opts": self.model._meta,
                   "title": f"{action.title()} {goal.goal_key}", "goal": goal,
                   "action": action, "gate": gate, "form": form, "report": report,
                   "refusal": refusal}
        return TemplateResponse(request, "admin/ledger/goal/act.html", context)

    def _act(self, request: HttpRequest, goal: Goal, action: str, gate: str, reason: str,
             back: str) -> HttpResponse:
        try:  # the same use case as the API's and `ledger stop|recover|wake|approve`
            state = operators.act(action, goal.pk, operator=request.user.get_username(),
                                  reason=reason, gate=gate).state
        except DomainError as error:
            self.message_user(request, f"Refused ({error.code}): {error.detail}",
                              messages.ERROR)
        else:
            self.message_user(request, f"{action}: the goal is now {state.status}"
                              + (f"/{state.reason}" if state.reason else ""))
        return HttpResponseRedirect(back)


def _uuid_or_404(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise Http404("No goal has this id") from None


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
        return [(kind, kind) for kind in EVENT_KINDS]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(kind=self.value()) if self.value() else queryset


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
        return cut(summary(event.kind, event.data), width="long")

    @admin.display(description="recorded (UTC)", ordering="id")
    def recorded(self, event: Event) -> str:
        # Sorted by id: ids grow with time, and recorded_at has no index.
        return utc(event.recorded_at)


# ---------------------------------------------------------------- the site

admin.site.site_header = "Wake Ledger"
admin.site.site_title = "Wake Ledger admin"
admin.site.index_title = "Goals, events and who may see them"
# The lists are wide (a goal's id, key, objective, holder, next wake ...);
# the app sidebar's 290 px clipped them at 1400 px, and the breadcrumbs and
# the index already lead everywhere it did.
admin.site.enable_nav_sidebar = False
# "View site": the one public page a person reads, the API's documentation.
admin.site.site_url = reverse_lazy("api:docs")


# ---------------------------------------------------------------- django-q2, read-only
#
# Goal schedules belong to goals: a wake is scheduled, moved and cancelled by
# the goal's own commands, which record why in its history. Editing a
# Schedule row here would change when a goal wakes behind its ledger's back,
# and resubmitting a task would replay a wake outside its claim. So django-q2's
# own admin is shown read-only: no add, change, delete or resubmit action.


def _read_only(base: type[admin.ModelAdmin]) -> type[admin.ModelAdmin]:
    class ReadOnly(base):  # type: ignore[valid-type, misc]
        actions = ()

        def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
            return False

        def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
            return False

        def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
            return False

    ReadOnly.__name__ = ReadOnly.__qualname__ = f"ReadOnly{base.__name__}"
    return ReadOnly


def _register_django_q_read_only() -> None:
    from django_q import admin as q_admin
    from django_q.models import Failure, OrmQ, Schedule, Success

    for model, base in ((Schedule, q_admin.ScheduleAdmin), (Success, q_admin.TaskAdmin),
                        (Failure, q_admin.FailAdmin), (OrmQ, q_admin.QueueAdmin)):
        if admin.site.is_registered(model):
            admin.site.unregister(model)
            admin.site.register(model, _read_only(base))


_register_django_q_read_only()


# ---------------------------------------------------------------- users and groups
#
# Accounts are the one thing superusers edit here (Django's own user and group
# admin, which only superusers may use): who may log in, with which role. The
# three role groups are named in code (ledger.access.accounts), so they cannot be renamed
# or deleted here; a deleted one would silently strip every member's role.


class RoleGroupAdmin(GroupAdmin):
    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple:
        fields = tuple(super().get_readonly_fields(request, obj))
        return (*fields, "name") if obj is not None and obj.name in ROLES else fields

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.name in ROLES:
            return False
        return super().has_delete_permission(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        # The bulk action too: role groups are kept.
        super().delete_queryset(request, queryset.exclude(name__in=ROLES))


if admin.site.is_registered(Group):
    admin.site.unregister(Group)
admin.site.register(Group, RoleGroupAdmin)
