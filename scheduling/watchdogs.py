"""The server's side of wakes: django-q2 schedule rows kept in step with the events.

``apply`` is registered with the store (``store.register_effect``) and runs
inside the transaction of every command that appended events, so the ledger
and the scheduler never disagree, whichever shell ran the command. It
creates and deletes:

- the goal's one recurring watchdog (``wakeledger-watchdog-<goal>``), on its
  internal ``created`` / ``cancelled`` receipts;
- the one-off wake at a rate-limit reset (``wakeledger-reset-<goal>``) and the
  one-off wake the agent asked for (``wakeledger-wake-<goal>``), created by
  their ``wake.scheduled`` events and deleted once the state no longer has them
  pending (a wake or a lease used them up, the goal ended).

django-q2 does not enforce unique schedule names; the ledger does: the domain
creates a watchdog only when the goal has none live, under the goal's row lock.
"""

from datetime import datetime

from django_q.models import Schedule

from ledger.domain.events import ReceiptRecorded, WakeScheduled
from ledger.domain.policy import interval_minutes
from ledger.domain.watchdogs import requested_schedule_name, reset_schedule_name, schedule_name
from ledger.operators.doctor import FIRE, SWEEPER_NAME, ensure_sweeper
from ledger.services.effects import Outcome

__all__ = ["FIRE", "SWEEPER_NAME", "apply", "ensure_sweeper", "requested_schedule_name",
           "reset_schedule_name", "schedule_name"]


def apply(goal_id: str, outcome: Outcome) -> None:
    """The store effect: schedule rows follow the events (see the module doc)."""
    before, after = outcome.before, outcome.state
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
                    minutes=interval_minutes(after.watchdog["interval_seconds"]),
                    repeats=-1, next_run=datetime.fromisoformat(str(payload.due_at)),
                    # The task learns which slot fired it: that is its claim id.
                    intended_date_kwarg="intended_date")
    # One-off wakes used up or dropped by this command.
    for pending in ("reset_wake", "requested_wake"):
        was = getattr(before, pending)
        if not was:
            continue  # none was pending (most commands): nothing to drop
        now = getattr(after, pending)
        if was.get("schedule_name") and was != now and (
                not now or now.get("schedule_name") != was["schedule_name"]):
            Schedule.objects.filter(name=was["schedule_name"]).delete()


def _one_off(goal_id: str, name: str, kind: str, when: datetime) -> None:
    # A later request replaces the pending one (one row per kind and goal).
    # django-q2 deletes a ONCE schedule after it ran.
    Schedule.objects.filter(name=name).delete()
    Schedule.objects.create(name=name, func=FIRE, args=repr(goal_id),
                            kwargs=repr({"kind": kind}), schedule_type=Schedule.ONCE,
                            repeats=-1, next_run=when, intended_date_kwarg="intended_date")
