"""The server's side of internal watchdogs: django-q2 schedules.

A command whose events say "an internal watchdog was created" or "…was
cancelled" gets its django-q2 Schedule created or deleted in the same
transaction as those events, so the ledger and the scheduler never disagree.
django-q2 does not enforce unique schedule names; the ledger does: the domain
creates a watchdog only when the goal has none live, under the goal's row lock.
"""

import uuid
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django_q.models import Schedule

from ledger import store
from ledger.domain import Command
from ledger.domain.events import RECEIPT_RECORDED, WAKE_SCHEDULED

FIRE = "scheduling.tasks.fire_watchdog"
SWEEP = "scheduling.tasks.sweep_leases"
SWEEPER_NAME = "wakeledger-lease-sweeper"


def schedule_name(goal_id: str | uuid.UUID) -> str:
    return f"wakeledger-watchdog-{goal_id}"


def interval_seconds(cadence_minutes: int) -> int:
    return cadence_minutes * settings.WAKELEDGER_CADENCE_UNIT_SECONDS


def execute(goal_id: str | uuid.UUID, command: Command, *, actor: str,
            idempotency_key: str | None = None) -> store.Outcome:
    """store.execute plus the schedule changes its events call for, atomically."""
    with transaction.atomic():
        outcome = store.execute(goal_id, command, actor=actor, idempotency_key=idempotency_key)
        apply(str(goal_id), outcome)
    return outcome


def reset_schedule_name(goal_id: str | uuid.UUID) -> str:
    return f"wakeledger-reset-{goal_id}"


_ENDINGS = frozenset({"goal.completed", "goal.failed", "goal.blocked", "goal.stopped"})


def apply(goal_id: str, outcome: store.Outcome) -> None:
    for event in outcome.events:
        if event.kind == WAKE_SCHEDULED and event.data.get("kind") == "reset":
            # The one-off wake at a rate-limit reset (rule 9 allows it beside
            # the watchdog). django-q2 deletes a ONCE schedule after it ran.
            Schedule.objects.filter(name=event.data["schedule_name"]).delete()
            Schedule.objects.create(
                name=event.data["schedule_name"], func=FIRE, args=repr(goal_id),
                schedule_type=Schedule.ONCE, repeats=-1,
                next_run=datetime.fromisoformat(event.data["due_at"]),
                intended_date_kwarg="intended_date")
            continue
        if event.kind in _ENDINGS:
            Schedule.objects.filter(name=reset_schedule_name(goal_id)).delete()
            continue
        if event.kind != RECEIPT_RECORDED or event.data.get("backend") != "internal":
            continue
        name = event.data["schedule_name"]
        # Any stray schedule of that name goes first: exactly one watchdog.
        Schedule.objects.filter(name=name).delete()
        if event.data["status"] == "created":
            watchdog = outcome.state.watchdog
            Schedule.objects.create(
                name=name,
                func=FIRE,
                args=repr(goal_id),
                schedule_type=Schedule.MINUTES,
                # django-q2 counts whole minutes (and looks every 30 s).
                minutes=max(1, round(watchdog["interval_seconds"] / 60)),
                repeats=-1,
                next_run=datetime.fromisoformat(event.data["due_at"]),
                # The task learns which occurrence fired it: that is its claim id.
                intended_date_kwarg="intended_date",
            )


def ensure_sweeper(**_: Any) -> None:
    """The lease sweeper's schedule, kept in step with the settings (post_migrate)."""
    Schedule.objects.update_or_create(
        name=SWEEPER_NAME,
        defaults={"func": SWEEP, "schedule_type": Schedule.MINUTES,
                  "minutes": settings.WAKELEDGER_SWEEP_MINUTES, "repeats": -1},
    )
