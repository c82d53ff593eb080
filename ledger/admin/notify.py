"""Notifications in the admin: the channels, and every notification
for an auditor — what, to which channel (redacted), when, delivered or not,
attempts, the last error's type. Notifications are read-only like the rest of
the ledger. Channels are configuration: a superuser adds, edits or removes
them; the URL is written once and never shown again (stored encrypted, shown
redacted; docs/notifications.md)."""

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from ledger.admin.base import ReadOnlyAdmin, UUIDSearchMixin, utc, wrapped
from ledger.models import Channel, Goal, Notification
from ledger.services import notifications


class ChannelForm(forms.ModelForm):
    # Write-only: the field is never filled from the stored value, so a
    # saved URL cannot be read back through the page or its HTML.
    url = forms.CharField(
        label="Apprise URL", required=False, max_length=2000,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off",
                                                              "size": 80}),
        help_text="e.g. mailto://user:password@smtp.example.com?to=ops@example.com, "
                  "slack://…, ntfy://…, json://host/path. Stored encrypted, shown redacted; "
                  "leave empty to keep the current one.")

    class Meta:
        model = Channel
        fields = ("name", "url", "agents", "workspaces", "reasons", "enabled")

    def clean_url(self) -> str:
        url = self.cleaned_data.get("url", "").strip()
        if not url and not self.instance.pk:
            raise forms.ValidationError("An Apprise URL is required.")
        if url and not notifications.url_is_valid(url):
            # Never echo the text back: it carries credentials.
            raise forms.ValidationError("Apprise cannot load this URL (check its scheme "
                                        "and parts; see the Apprise wiki).")
        return url


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    form = ChannelForm
    list_display = ("name", "url_redacted", "routing", "enabled", "created")
    readonly_fields = ("url_redacted",)

    @admin.display(description="routing")
    def routing(self, channel: Channel) -> str:
        parts = [f"{name}: {', '.join(getattr(channel, name).split())}"
                 for name in ("agents", "workspaces", "reasons") if getattr(channel, name).strip()]
        return "; ".join(parts) or "everything"

    @admin.display(description="created", ordering="created_at")
    def created(self, channel: Channel) -> str:
        return utc(channel.created_at)

    # Only superusers write channels (auditors and operators see them redacted).
    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser

    def save_model(self, request: HttpRequest, obj: Channel, form: forms.ModelForm,
                   change: bool) -> None:
        url = form.cleaned_data.get("url", "")
        if url:
            notifications.protect_url(obj, url)
        super().save_model(request, obj, form, change)


@admin.register(Notification)
class NotificationAdmin(UUIDSearchMixin, ReadOnlyAdmin):
    uuid_field = "goal_id"
    # Fits a 1400 px window: the channel cut (whole in its title), no id column.
    list_display = ("kind", "goal", "reason", "to", "status", "attempts", "last_error",
                    "created", "done")
    list_display_links = ("kind",)
    list_filter = ("status", "kind", "reason")
    search_fields = ("key", "channel_redacted")
    ordering = ("-id",)
    fields = ("key", "kind", "goal_id", "reason", "channel", "channel_redacted", "title",
              "body", "status", "attempts", "last_error", "created_at", "next_attempt_at",
              "sending_at", "done_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Notification]:
        # Each row's goal key, read by primary key in the page's own query: a
        # notification keeps its goal's id, not a foreign key, and a key per
        # row would be a query per row.
        return super().get_queryset(request).annotate(goal_key=Subquery(
            Goal.objects.filter(pk=OuterRef("goal_id")).values("goal_key")[:1]))

    @admin.display(description="goal", ordering="goal_key")
    def goal(self, row: Notification) -> str:
        """The goal's key, linked to its page (its id in the title); the
        scheduler's own notices have no goal."""
        if row.goal_id is None:
            return "—"
        key = getattr(row, "goal_key", None) or row.goal_id.hex[:8]
        return format_html('<a href="{}" title="{}" data-testid="goal">{}</a>',
                           reverse("admin:ledger_goal_timeline", args=[row.goal_id]),
                           row.goal_id, key)

    @admin.display(description="channel", ordering="channel_redacted")
    def to(self, row: Notification) -> str:
        return wrapped(row.channel_redacted)

    @admin.display(description="recorded", ordering="created_at")
    def created(self, row: Notification) -> str:
        return utc(row.created_at)

    @admin.display(description="done", ordering="done_at")
    def done(self, row: Notification) -> str:
        return utc(row.done_at)
