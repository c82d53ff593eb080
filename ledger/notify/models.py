"""Notifications: the channels an operator added in the admin, the
outbox of notifications, and each goal's notification state.

``Notification`` is an outbox row, written in the transaction of the event
that flipped a goal's standing (``ledger.services.followup.record_flip``, a
step of every command's follow-up), so a flip is recorded exactly once or not at all. Its ``key``
is unique and stable: the same notice is never recorded twice, and a receiver
can drop a redelivered copy by it. Rows hold no secret: the channel is named
by a reference and a redacted form, never its URL.

``Channel`` URLs carry credentials (a webhook path, an SMTP password, a bot
token): stored encrypted (Fernet, a key derived from SECRET_KEY), shown only
redacted (docs/notifications.md). Channels from WAKELEDGER_NOTIFY are never
written to the database.
"""

from django.db import models


class Channel(models.Model):
    """An Apprise URL an operator added in the admin, with its routing."""

    name = models.CharField(max_length=80, unique=True)
    url_encrypted = models.TextField(editable=False)
    url_redacted = models.CharField(max_length=300, editable=False)
    # Routing: empty means every one. Agents and reasons match exactly, a
    # workspace by prefix (a path and everything under it). One per line.
    agents = models.TextField(blank=True, default="",
                              help_text="Only these agents' goals (one per line; empty: all).")
    workspaces = models.TextField(blank=True, default="",
                                  help_text="Only goals under these workspaces (one path prefix "
                                            "per line; empty: all).")
    reasons = models.TextField(blank=True, default="",
                               help_text="Only these reason codes (one per line, e.g. "
                                         "BLOCKED_APPROVAL, SCHEDULER_SILENT; empty: all).")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "ledger"

    def __str__(self) -> str:
        return f"{self.name} ({self.url_redacted})"


class Notification(models.Model):
    """One notice to one channel: what, where (redacted), when, and its delivery."""

    PENDING, SENDING, SENT, FAILED = "pending", "sending", "sent", "failed"
    STATUSES = [(s, s) for s in (PENDING, SENDING, SENT, FAILED)]

    id = models.BigAutoField(primary_key=True)
    key = models.CharField(max_length=200, unique=True)  # the stable id
    kind = models.CharField(max_length=32)
    goal_id = models.UUIDField(null=True, blank=True)
    reason = models.CharField(max_length=64, blank=True, default="")
    channel = models.CharField(max_length=80)  # "env:<digest>" or "admin:<pk>"
    channel_redacted = models.CharField(max_length=300)
    title = models.CharField(max_length=300)
    body = models.TextField()
    status = models.CharField(max_length=16, choices=STATUSES, default=PENDING)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField()
    sending_at = models.DateTimeField(null=True, blank=True)
    done_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=64, blank=True, default="")  # a type, never text

    class Meta:
        app_label = "ledger"
        indexes = [
            # The sender looks only at unfinished rows, due first.
            models.Index(fields=["status", "next_attempt_at"], name="ledger_notify_todo"),
            models.Index(fields=["goal_id", "created_at"], name="ledger_notify_goal"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} → {self.channel_redacted} ({self.status})"


class GoalNotice(models.Model):
    """A goal's notification state: whether it needs a human as the last
    notice said, since when, and when a human was last told (reminders count
    from it). Written with the flip, in the same transaction."""

    goal_id = models.UUIDField(primary_key=True)
    needs_human = models.BooleanField()
    reason = models.CharField(max_length=64, blank=True, default="")
    since = models.DateTimeField()
    last_notified_at = models.DateTimeField()

    class Meta:
        app_label = "ledger"
        indexes = [models.Index(fields=["needs_human", "last_notified_at"],
                                name="ledger_goalnotice_remind")]

    def __str__(self) -> str:
        return f"{self.goal_id} needs_human={self.needs_human}"
