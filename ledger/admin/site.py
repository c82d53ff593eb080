"""The admin site itself: its titles, django-q2's models read-only, the role
groups protected."""


from typing import Any

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin
from django.contrib.auth.models import Group
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse_lazy

from ledger.access.accounts import ROLES
from ledger.admin.base import NoWrites

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
    class ReadOnly(NoWrites, base):  # type: ignore[valid-type, misc]
        actions = ()

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
