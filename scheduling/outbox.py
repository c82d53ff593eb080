"""Sending the dispatch outbox (docs/design.md, "Wakes and claims"; the
uncertain-attempt rule's crash cases).

A granted push wake's transaction wrote a ``pending`` row next to its events
(``ledger.services.followup.record_dispatches``). ``send`` then:

1. marks the row ``sending`` and commits — before any network call;
2. sends it through the dispatcher;
3. records the result as ``continuation.dispatched`` and marks the row
   ``sent`` / ``failed`` / ``uncertain``, in one transaction.

A crash before 1 leaves the row ``pending``: it is sent later, safely (the
continuation never started). A crash between 1 and 3 leaves it ``sending``:
the request may or may not have gone out, so it is never sent again; the
sweeper records it as uncertain, and the uncertain-attempt rule blocks the goal if the
continuation stays silent. A dispatch that certainly started nothing releases
its lease at once (the domain decides that, from the recorded result).
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction

from ledger.domain import GoalState
from ledger.eventstore import clock, failpoints
from ledger.project import requestid
from ledger.services import wakes
from scheduling import dispatch
from scheduling.models import Dispatch

logger = logging.getLogger(__name__)


def send_pending(goal_id: str | None = None, state: GoalState | None = None) -> int:
    """Send every pending row (of one goal, or all); returns how many were sent.
    ``state``: the goal as the claim that just committed left it, so a push
    wake reads its goal once (the claim's locked read), not again to send."""
    rows = Dispatch.objects.filter(status=Dispatch.PENDING)
    if goal_id is not None:
        rows = rows.filter(goal_id=goal_id)
    return sum(send(pk, state) for pk in rows.order_by("created_at").values_list("pk", flat=True))


def send(pk: int, state: GoalState | None = None) -> bool:
    with transaction.atomic():
        row = Dispatch.objects.select_for_update().filter(pk=pk, status=Dispatch.PENDING).first()
        if row is None:
            return False  # another sender has it, or it is done
        row.status, row.sending_at = Dispatch.SENDING, clock.now()
        row.save(update_fields=["status", "sending_at"])
    # Under the id of the request that wrote the row: the dispatch's lines
    # (here, in the dispatcher, in the result's command) share it.
    with requestid.bound(row.request_id or requestid.current()):
        return _send(row, state)


def _send(row: Dispatch, state: GoalState | None) -> bool:
    failpoints.reached("outbox.after_sending_mark")
    goal_id = str(row.goal_id)
    known = state if state is not None and state.goal_id == goal_id else None
    order = wakes.delivery(goal_id, row.occurrence_id, row.generation, known)
    if order is None:  # the wake is no longer pending: nothing was sent
        _finish(row, Dispatch.FAILED, "superseded: the wake is no longer pending")
        return False
    result = dispatch.dispatch(row.dispatcher, goal_id=goal_id, occurrence_id=row.occurrence_id,
                               session_key=order.session_key, packet=order.packet,
                               report=order.report.as_dict(),
                               lease=order.lease.as_dict() if order.lease else {})
    failpoints.reached("outbox.after_send")
    status = (Dispatch.SENT if result.ok else
              Dispatch.UNCERTAIN if result.uncertain else Dispatch.FAILED)
    with transaction.atomic():
        _record(row, result.ok, result.detail, result.uncertain)
        _finish(row, status, result.detail)
    logger.info("dispatch %s of goal %s via %s: %s (%s)", row.occurrence_id, goal_id,
                row.dispatcher, status, result.detail)
    return result.ok


NEVER_SENT = ("never sent: its lease expired before a sender took it (was the scheduler "
              "down?)")


def release_lapsed() -> int:
    """Pending rows whose lease expired before any sender took them: recorded
    as dispatches that started nothing, which frees the lease (the goal waits
    for its next wake). Run by the sweeper before it expires leases, or a
    push goal woken while the scheduler was down would be blocked
    INTERRUPTED_UNKNOWN for a continuation nobody ever received."""
    count = 0
    for pk in Dispatch.objects.filter(status=Dispatch.PENDING, generation__gt=0) \
            .values_list("pk", flat=True):
        with transaction.atomic():
            row = Dispatch.objects.select_for_update() \
                .filter(pk=pk, status=Dispatch.PENDING).first()
            if row is None or not wakes.lapsed(str(row.goal_id), row.generation):
                continue
            _record(row, False, NEVER_SENT, False)
            _finish(row, Dispatch.FAILED, NEVER_SENT)
        count += 1
    return count


def resolve_stuck() -> int:
    """Rows left ``sending`` by a sender that died mid-call: uncertain, never resent."""
    timeout = max((float(spec.get("timeout", 10)) for spec in dispatch.configured().values()),
                  default=10.0)
    cutoff = clock.now() - timedelta(seconds=timeout + settings.WAKELEDGER_OUTBOX_GRACE_SECONDS)
    stuck = Dispatch.objects.filter(status=Dispatch.SENDING, sending_at__lt=cutoff)
    count = 0
    for row in stuck:
        with transaction.atomic():
            _record(row, False, "the sender stopped mid-dispatch", True)
            _finish(row, Dispatch.UNCERTAIN, "the sender stopped mid-dispatch")
        count += 1
    return count


def _record(row: Dispatch, ok: bool, detail: str, uncertain: bool) -> None:
    why_not = wakes.record_dispatch(str(row.goal_id), row.occurrence_id, row.dispatcher, ok=ok,
                                    detail=detail, uncertain=uncertain,
                                    generation=row.generation)
    if why_not:  # the goal ended meanwhile: nothing to record on it
        logger.info("dispatch of %s not recorded: %s", row.occurrence_id, why_not)


def _finish(row: Dispatch, status: str, detail: str) -> None:
    Dispatch.objects.filter(pk=row.pk).update(status=status, detail=detail[:500],
                                              done_at=clock.now())
