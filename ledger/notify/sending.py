"""Sending the notification outbox through Apprise, with explicit crash states.

``send`` for one row:

1. marks it ``sending`` (attempts + 1) and commits — before any network call;
2. sends it through Apprise, to the URL its channel reference resolves to;
3. marks it ``sent``, or ``pending`` again with a later ``next_attempt_at``
   (``failed`` once WAKELEDGER_NOTIFY_MAX_ATTEMPTS are spent).

A crash before 1 leaves it ``pending``: sent later. A crash between 1 and 3
leaves it ``sending``; ``resolve_stuck`` makes it ``pending`` again once its
timeout and grace passed, and it is sent again: delivery is at least once.
The residual window is a crash after the service accepted the message and
before step 3 committed: then the receiver gets a second copy carrying the
same notification id (the row's ``key``), by which it can drop it. Unlike a
dispatch (which starts work and is never sent twice), a notice told twice
costs a human a glance; one never told costs the promise.

Nothing a service answers is kept: ``last_error`` is a type
(``not_delivered``, ``channel_gone``, or an exception's class name), and
Apprise's own log, which may quote a service's answer, is not propagated.
"""

import logging
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F

from ledger.eventstore import clock, failpoints
from ledger.notify import channels
from ledger.notify.models import Notification

logger = logging.getLogger(__name__)

NOT_DELIVERED = "not_delivered"
CHANNEL_GONE = "channel_gone"


def backoff(attempts: int) -> timedelta:
    """After the n-th failed attempt: 1, 2, 4, 8 … minutes, at most an hour."""
    return timedelta(minutes=min(2 ** max(attempts - 1, 0), 60))


# A pass stops taking rows after this long, well inside django-q2's task
# timeout: a task killed mid-send would leave its row to the stuck timeout.
PASS_SECONDS = 30.0


def send_due(now: datetime | None = None, limit: int = 200) -> int:
    """Send the pending rows that are due, oldest first; returns how many were sent."""
    now = now or clock.now()
    due = Notification.objects.filter(status=Notification.PENDING, next_attempt_at__lte=now) \
        .order_by("next_attempt_at", "pk").values_list("pk", flat=True)[:limit]
    started, sent = time.monotonic(), 0
    for pk in list(due):
        if time.monotonic() - started > PASS_SECONDS:
            break  # the rest is the next pass's
        sent += send(pk)
    return sent


def send(pk: int) -> bool:
    now = clock.now()
    with transaction.atomic():
        claimed = Notification.objects.filter(pk=pk, status=Notification.PENDING) \
            .update(status=Notification.SENDING, sending_at=now, attempts=F("attempts") + 1)
    if not claimed:
        return False  # another sender has it, or it is done
    row = Notification.objects.get(pk=pk)
    failpoints.reached("notify.after_sending_mark")
    url = channels.url_of(row.channel)
    error = CHANNEL_GONE if url is None else _deliver(url, row.title, row.body)
    failpoints.reached("notify.after_send")
    done = clock.now()
    if error is None:
        Notification.objects.filter(pk=pk).update(status=Notification.SENT, done_at=done,
                                                  last_error="")
    elif row.attempts >= settings.WAKELEDGER_NOTIFY_MAX_ATTEMPTS or error == CHANNEL_GONE:
        Notification.objects.filter(pk=pk).update(status=Notification.FAILED, done_at=done,
                                                  last_error=error)
    else:
        Notification.objects.filter(pk=pk).update(
            status=Notification.PENDING, next_attempt_at=done + backoff(row.attempts),
            last_error=error)
    logger.info("notification %s (%s) to %s: %s", row.key, row.kind, row.channel_redacted,
                "sent" if error is None else f"not sent ({error}, attempt {row.attempts})")
    return error is None


def _deliver(url: str, title: str, body: str) -> str | None:
    """None when Apprise says the service took it; else an error type."""
    import apprise  # only a process that sends pays for its import

    try:
        sender = apprise.Apprise()
        if not sender.add(url):
            return CHANNEL_GONE
        ok = sender.notify(title=title, body=body, body_format=apprise.NotifyFormat.TEXT)
    except Exception as error:  # a plugin's failure is a failed attempt
        return type(error).__name__[:64]
    return None if ok else NOT_DELIVERED


def resolve_stuck(now: datetime | None = None) -> int:
    """Rows left ``sending`` by a sender that died mid-call: pending again
    (at least once; see the module's note on the residual window)."""
    now = now or clock.now()
    cutoff = now - timedelta(seconds=settings.WAKELEDGER_NOTIFY_TIMEOUT_SECONDS
                             + settings.WAKELEDGER_OUTBOX_GRACE_SECONDS)
    return Notification.objects.filter(status=Notification.SENDING, sending_at__lt=cutoff) \
        .update(status=Notification.PENDING, next_attempt_at=now, last_error="sender_stopped")
