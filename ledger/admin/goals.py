"""A goal's admin: the list (with "needs a human"), the timeline page, the
dashboard, the verifiable export and the operator acts."""


import json
import uuid
from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import mark_safe

from ledger.admin.base import (
    ReadOnlyAdmin,
    ReasonForm,
    UUIDSearchMixin,
    clamp,
    cut_left,
    int_or_none,
    is_operator,
    utc,
)
from ledger.domain import DomainError, GoalState
from ledger.domain.vocabulary import TERMINAL_STATUSES, WHY
from ledger.eventstore import clock, projection
from ledger.log import export
from ledger.models import Goal
from ledger.operators import goalids, passes, timeline
from ledger.operators.summaries import summary
from ledger.operators.terminal import provider_waiting, woken
from ledger.project import dispatchers
from ledger.services import alerts, loghealth, notifications, operators
from ledger.services.bodies import Standing


class NeedsHumanFilter(admin.SimpleListFilter):
    """The goals GET /alerts lists (``ledger.services.alerts``: one query), by reason:
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
        return clamp(goal.state.get("objective", ""))

    @admin.display(description="workspace", ordering="workspace")
    def workspace_cut(self, goal: Goal) -> str:
        return cut_left(goal.workspace)

    @admin.display(description="status, reason", ordering="status")
    def status_badge(self, goal: Goal) -> str:
        # The reason under its status, not a column of its own: the list
        # then fits a 1400 px window (the reason filter is on the right).
        badge = format_html('<span class="wl-badge wl-{}">{}</span>', goal.status, goal.status)
        if not goal.reason:
            waiting = goal.state.get("provider_wait") and provider_waiting(
                GoalState.from_dict(goal.state), clock.now())
            return (format_html('{}<br><span class="wl-reason">{}</span>', badge, waiting)
                    if waiting else badge)
        # A break allowed after each underscore: INTERRUPTED_UNKNOWN may take
        # two lines rather than widen the column past the window.
        parts = goal.reason.split("_")
        reason = format_html_join(mark_safe("_<wbr>"), "{}", ((part,) for part in parts))
        return format_html('{}<br><span class="wl-reason">{}</span>', badge, reason)

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
        cursor = {name: int_or_none(request.GET.get(name)) for name in ("before", "after")}
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
        # The chain's check and the log's state together (docs/integrity.md,
        # "What the admin shows"): never "verified" while either fails.
        # This page's events, or every one with ?verify=all (as the chain).
        log = loghealth.goal_standing(str(goal.pk), None if full else page.events,
                                      events=goal.version)
        context = {
            **self.admin_site.each_context(request),
            "title": f"{goal.goal_key} — timeline",
            "opts": self.model._meta,
            "goal": goal,
            "state": state,
            "watchdog_health": standing.watchdog_health,
            "provider_waiting": provider_waiting(state, clock.now()),
            # Liveness (ledger.domain.liveness): the same label, evidence and
            # alert as the API, /alerts and the dashboard (services.bodies).
            "liveness": standing.liveness,
            "expected": standing.expected,
            "alert": standing.alert,
            "page": page,
            "rows": rows,
            "chart": timeline.chart(goal),
            "full_verification": full,
            "log_check": log.check,
            "log_problems": log.problems,
            "log_refutes": log.refutes,
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
            # Who was told (docs/notifications.md): the newest notices, redacted.
            "notifications": notifications.of_goal(goal.pk),
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
        # The wake-row check as of the doctor's newest pass (the hourly repair
        # keeps it): checking every goal's rows here cost a query per goal.
        checked = passes.wake_rows(clock.now(), timeline.LIMIT)
        groups = timeline.stuck_goals(checked)
        # Each goal's notification state: when a human was last told, delivered or not.
        notices = notifications.states(item["goal"].pk for group in groups
                                       for item in group["goals"])
        for group in groups:
            for item in group["goals"]:
                item["notice"] = notices.get(str(item["goal"].pk))
        return [{"id": "stuck", "title": "Goals needing attention",
                 "template": "admin/ledger/goal/dashboard_stuck.html",
                 "groups": groups, "scheduler": alerts.scheduler_health(),
                 "checked": checked, "active_now": timeline.active_goals()},
                # Read-only: dispatchers are edited in their file, never here.
                {"id": "dispatchers", "title": "Dispatchers",
                 "template": "admin/ledger/goal/dashboard_dispatchers.html",
                 "dispatchers": dispatchers.described(),
                 "source": settings.WAKELEDGER_DISPATCHERS_SOURCE}]

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
            acted = operators.act(action, goal.pk, operator=request.user.get_username(),
                                  reason=reason, gate=gate)
        except DomainError as error:
            self.message_user(request, f"Refused ({error.code}): {error.detail}",
                              messages.ERROR)
        else:
            state = acted.state
            self.message_user(request, f"{action}: the goal is now {state.status}"
                              + (f"/{state.reason}" if state.reason else "")
                              # A wake says what it did: pushed, or ready for pull and why.
                              + (f"; {woken(acted.claim)}" if acted.claim else ""))
        return HttpResponseRedirect(back)


def _uuid_or_404(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise Http404("No goal has this id") from None

