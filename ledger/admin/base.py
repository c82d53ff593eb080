"""What every admin page shares: read-only model admins with bounded counts,
search by a goal id's prefix, who is an operator, the reason form, times in UTC
and cut text."""


import uuid
from datetime import UTC, datetime
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.views.main import PAGE_VAR
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.functional import cached_property
from django.utils.html import format_html

from ledger.access.accounts import OPERATOR, role_of
from ledger.operators import goalids


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


class NoWrites:
    """Admin permissions for records nobody edits by hand: the ledger's own
    (append-only) and django-q2's (the scheduler's)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyAdmin(NoWrites, admin.ModelAdmin):
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
        page = max(int_or_none(request.GET.get(PAGE_VAR)) or 1, 1)
        limit = max(self.count_limit, self.list_max_show_all,
                    (page + self.PAGES_AHEAD) * per_page)
        return BoundedCountPaginator(queryset, per_page, orphans, allow_empty_first_page,
                                     limit=limit)



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


def cut_left(text: str) -> str:
    """A path cut from the left: its distinguishing tail shows
    (``…/services/billing-api``), never a column of identical beginnings;
    the whole of it in the title. The inner ``bdi`` keeps the text
    left-to-right inside the right-to-left box that puts the ellipsis first."""
    return format_html('<span class="wl-cut wl-cut-left" title="{}"><bdi>{}</bdi></span>',
                       text, text)


def clamp(text: str) -> str:
    """A long text on at most three lines, wrapped (the whole of it in the
    title, and on the goal's page)."""
    return format_html('<span class="wl-clamp" title="{}">{}</span>', text, text)


def wrapped(text: str) -> str:
    """A text shown whole, wrapped in its column (an event's summary)."""
    return format_html('<span class="wl-wrap">{}</span>', text)


def int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
