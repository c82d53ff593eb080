"""What a command causes beyond its events: the three writes
``caller.follow_up`` lists, each in the command's transaction right after
its events, so that each row exists exactly when the committed events say
so, whichever shell ran the command.

- ``follow_schedules``: the goal's django-q2 rows (its watchdog, its one-off
  wakes) follow its events;
- ``record_dispatches``: a granted push wake's row in the dispatch outbox,
  sent after the commit by the scheduler's sender (``scheduling.outbox``);
- ``record_flip``: a flip of the goal's standing gets its notice and one
  notification row per channel that takes it, sent after the commit.

On the everyday command (a checkpoint, a heartbeat) each is a few checks of
the outcome in memory and writes nothing.
"""

import logging
from dataclasses import dataclass
from datetime import datetime

from django import db
from django.db import transaction
from django_q.models import Schedule
from django_q.tasks import async_task

from ledger.domain import liveness, notices
from ledger.domain.dispatches import dispatches
from ledger.domain.kinds import ReceiptRecorded, WakeClaimed, WakeScheduled
from ledger.domain.policy import interval_minutes
from ledger.eventstore import clock
from ledger.eventstore.store import Outcome
from ledger.models import Dispatch
from ledger.notify.models import GoalNotice
from ledger.project.requestid import current_id
from ledger.services.notifications import enqueue, goal_link, subject_of
from ledger.services.schedules import FIRE, SEND_NOTIFICATIONS

# The outbox's lines, written here or by its sender, under one name.
logger = logging.getLogger("scheduling.outbox")
notify_logger = logging.getLogger("ledger.services.notifications")

# ---------------------------------------------------------------- django-q2's rows


def follow_schedules(outcome: Outcome) -> None:
    """The goal's django-q2 rows follow the command's events: its watchdog
    (created, replaced or deleted as a receipt says) and its one-off wakes
    (created as scheduled; dropped once used up or replaced). django-q2 does
    not enforce unique schedule names; the ledger does: the domain creates a
    watchdog only when the goal has none live, under the goal's row lock."""
    goal_id, before, after = outcome.state.goal_id, outcome.before, outcome.state
    for event in outcome.events:
        payload = event.payload
        if (isinstance(payload, WakeScheduled) and payload.one_off
                and payload.schedule_name):  # none: a host goal's host schedules it
            _one_off(goal_id, payload.schedule_name, str(payload.kind),
                     datetime.fromisoformat(str(payload.due_at)))
        elif isinstance(payload, ReceiptRecorded) and payload.backend == "internal":
            name = str(payload.schedule_name)
            # Any stray schedule of that name goes first: exactly one watchdog.
            Schedule.objects.filter(name=name).delete()
            if payload.status == "created":
                Schedule.objects.create(
                    name=name, func=FIRE, args=repr(goal_id),
                    schedule_type=Schedule.MINUTES,
                    minutes=interval_minutes(after.interval_seconds),
                    repeats=-1, next_run=datetime.fromisoformat(str(payload.due_at)),
                    # The task learns which slot fired it: that is its claim id.
                    intended_date_kwarg="intended_date")
    # One-off wakes used up or dropped by this command.
    for pending in ("reset_wake", "requested_wake"):
        was = getattr(before, pending)
        if was is None:
            continue  # none was pending (most commands): nothing to drop
        now = getattr(after, pending)
        if was.schedule_name and was != now and (
                now is None or now.schedule_name != was.schedule_name):
            Schedule.objects.filter(name=was.schedule_name).delete()


def _one_off(goal_id: str, name: str, kind: str, when: datetime) -> None:
    # A later request replaces the pending one (one row per kind and goal).
    # django-q2 deletes a ONCE schedule after it ran.
    Schedule.objects.filter(name=name).delete()
    Schedule.objects.create(name=name, func=FIRE, args=repr(goal_id),
                            kwargs=repr({"kind": kind}), schedule_type=Schedule.ONCE,
                            repeats=-1, next_run=when, intended_date_kwarg="intended_date")



# ---------------------------------------------------------------- the dispatch outbox


# A claim's outcomes that hand a wake on: its lease granted (a push wake
# carries it), or ready for the agent to pull.
GRANTED = "recurring_acquired"
PULLABLE = "ready_for_pull"


def record_dispatches(outcome: Outcome) -> None:
    """A wake to dispatch gets its outbox row in the command's transaction;
    the scheduler's sender (``scheduling.outbox``) sends it after the commit."""
    goal_id = outcome.state.goal_id
    for order in orders(outcome):
        Dispatch.objects.create(goal_id=goal_id, occurrence_id=order.occurrence_id,
                                dispatcher=order.dispatcher, generation=order.generation,
                                created_at=clock.now(), request_id=current_id.get())
        logger.info("dispatch %s of goal %s via %s: in the outbox", order.occurrence_id,
                    goal_id, order.dispatcher)


@dataclass(frozen=True)
class Order:
    """An outbox row a committed claim needs: which wake, through which
    dispatcher, handing over which lease generation (0: a notification)."""

    occurrence_id: str
    dispatcher: str
    generation: int


def orders(outcome: Outcome) -> list[Order]:
    """What a command's outcome asks the outbox to send (asked inside the
    command's transaction, ``record_dispatches``): a granted push wake
    hands over its lease; a ready wake of a dispatcher that carries no lease
    (OpenClaw's Gateway) is a notification, and its agent pulls the lease."""
    if not dispatches(outcome.state):
        return []
    name = outcome.state.setting("dispatch")
    found = []
    for event in outcome.events:
        claim = event.payload
        if not isinstance(claim, WakeClaimed) or claim.source not in ("internal", "operator"):
            continue
        if claim.outcome == GRANTED:
            lease = outcome.state.lease
            assert lease is not None, "a granted wake's lease"
            generation = lease.generation
        elif claim.outcome == PULLABLE:
            generation = 0
        else:
            continue
        found.append(Order(claim.occurrence_id, name, generation))
    return found


# ---------------------------------------------------------------- notices


def record_flip(outcome: Outcome) -> int:
    """A flip of the goal's standing (``notices.flip`` of its attention before
    and after) gets its notice, in the command's transaction: the goal's
    notification state and one outbox row per channel that takes it, so a
    flip is recorded exactly once with the event that caused it, or not at
    all. After the commit, a task sends them (within seconds, on the ORM
    broker's one-second poll); should that task never run, the sweeper's next
    pass sends them: recorded is never lost. Costs two pure calls on commands
    that flip nothing. Returns how many rows it wrote."""
    before, after = liveness.attention(outcome.before), liveness.attention(outcome.state)
    kind = notices.flip(before, after)
    if kind is None or not outcome.events:
        return 0
    goal_id = outcome.state.goal_id
    last = outcome.events[-1]
    now = last.recorded_at
    reason = after or before
    GoalNotice.objects.update_or_create(goal_id=goal_id, defaults={
        "needs_human": kind == notices.STARTED, "reason": after, "since": now,
        "last_notified_at": now})
    about = subject_of(outcome.state, reason, now)
    link = goal_link(goal_id)
    written = enqueue(f"{kind}:{goal_id}:{last.seq}", kind, notices.title(kind, about),
                      lambda key: notices.body(kind, about, liveness.why(reason), link, key),
                      goal_id=goal_id, reason=reason, agent=about.agent,
                      workspace=about.workspace, now=now)
    if written:
        transaction.on_commit(_ask_to_send)
    return written


def _ask_to_send() -> None:
    try:
        async_task(SEND_NOTIFICATIONS, task_name="notify.send")
    except db.DatabaseError as error:  # the sweeper sends it instead
        notify_logger.warning("could not queue the notification sender: %s",
                              type(error).__name__)
