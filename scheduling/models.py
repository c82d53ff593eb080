"""The dispatch outbox (DESIGN section 6, "Wake timing and occurrences").

A granted push wake writes its dispatch here in the claim's own transaction,
next to its events; a qcluster task sends it afterwards. The row holds no
secret: the continuation's lease token is derived again from the goal and the
occurrence when the row is sent (``ledger.services.tokens.dispatch_lease``).

The module also exists because Django sends post_migrate only to apps with a
models module, and the lease sweeper's schedule is ensured on post_migrate.
"""

from django.db import models


class Dispatch(models.Model):
    PENDING, SENDING, SENT, FAILED, UNCERTAIN = "pending", "sending", "sent", "failed", "uncertain"
    STATUSES = [(s, s) for s in (PENDING, SENDING, SENT, FAILED, UNCERTAIN)]

    id = models.BigAutoField(primary_key=True)
    goal_id = models.UUIDField()
    occurrence_id = models.CharField(max_length=300)
    dispatcher = models.CharField(max_length=64)
    generation = models.PositiveIntegerField()  # the lease generation it hands over
    status = models.CharField(max_length=16, choices=STATUSES, default=PENDING)
    detail = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField()
    # When it was marked sending: a row left "sending" past the dispatch
    # timeout belongs to a sender that died mid-call (uncertain, rule 6).
    sending_at = models.DateTimeField(null=True, blank=True)
    done_at = models.DateTimeField(null=True, blank=True)
    # The id of the web request whose claim wrote the row (ledger/project/requestid.py;
    # "" for a scheduler's wake): the sender logs under it, so a request's
    # lines and its dispatch's lines can be followed by one id.
    request_id = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        constraints = [
            # One dispatch per granted occurrence, however often it fired.
            models.UniqueConstraint(fields=["goal_id", "occurrence_id"],
                                    name="scheduling_dispatch_once"),
        ]
        indexes = [
            # The sender and the sweeper look only at unfinished rows.
            models.Index(fields=["status", "created_at"], name="scheduling_dispatch_todo"),
        ]

    def __str__(self) -> str:
        return f"{self.dispatcher} {self.occurrence_id} ({self.status})"
