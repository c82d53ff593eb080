"""The rows the ledger keeps in django-q2's schedule table, named once.

A goal's wakes are django-q2 ``Schedule`` rows: its one recurring watchdog
(``wakeledger-watchdog-<goal>``), the one-off wake at a rate-limit reset
(``wakeledger-reset-<goal>``) and the one-off wake the agent asked for
(``wakeledger-wake-<goal>``). ``follow`` creates and deletes them in the
transaction of the command whose events call for them (one of the steps
``caller.follow_up`` lists), so a schedule exists exactly when the committed
events say so, whichever shell ran the command.

The tasks those rows run are named here by their dotted paths: the strings
django-q2 stores and its workers import (the ``scheduling`` app defines the
functions; tests/scheduling/test_task_paths.py checks that each path resolves).
The doctor checks the rows by content against these names (``row_facts``).

django-q2 does not enforce unique schedule names; the ledger does: the domain
creates a watchdog only when the goal has none live, under the goal's row lock.
"""

import ast
import re
from datetime import datetime

from django_q.models import Schedule, Task

from ledger.domain.events import ReceiptRecorded, WakeScheduled, iso
from ledger.domain.overdue import ScheduleRow
from ledger.domain.policy import interval_minutes
from ledger.eventstore.store import Outcome

# The django-q2 tasks and rows the ledger relies on.
FIRE = "scheduling.tasks.fire_watchdog"
SWEEP = "scheduling.tasks.sweep_leases"
SWEEPER_NAME = "wakeledger-lease-sweeper"
REPAIR = "scheduling.maintenance.repair_schedules"
REPAIR_NAME = "wakeledger-schedule-repair"
SEND_NOTIFICATIONS = "scheduling.notify.send"

TASK_PATHS = (FIRE, SWEEP, REPAIR, SEND_NOTIFICATIONS)


def follow(outcome: Outcome) -> None:
    """Schedule rows follow the command's events (see the module doc)."""
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


# ---------------------------------------------------------------- facts


def row_facts(goal_id: str, names: list[str] | set[str]) -> tuple[ScheduleRow, ...]:
    """The goal's schedule rows as the domain judges them (it reads no table)."""
    found = {row.name: row for row in Schedule.objects.filter(name__in=list(names))}
    return tuple(_fact(goal_id, name, found.get(name)) for name in sorted(names))


def _fact(goal_id: str, name: str, row: Schedule | None) -> ScheduleRow:
    if row is None:
        return ScheduleRow(name, exists=False, last_error=last_error(name))
    fires = row.func == FIRE and row.repeats != 0 and goal_arg(row.args) == goal_id
    return ScheduleRow(name, exists=True, fires=fires,
                       next_run=iso(row.next_run) if row.next_run else "",
                       last_error=last_error(name))


_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)?)(?::|$)")


def last_error(name: str) -> str:
    """The exception type of the last task this row ran, if it failed (""
    otherwise). django-q2 tasks carry their schedule's name as their group
    and keep the error and its traceback in ``result``: only the type's name
    leaves that table (a message may quote anything, a secret included)."""
    task = Task.objects.filter(group=name).order_by("-stopped").only("success", "result").first()
    if task is None or task.success:
        return ""
    lines = [line for line in str(task.result or "").splitlines() if line.strip()]
    for line in reversed(lines):  # the traceback's last line names the exception
        match = _EXCEPTION.match(line.strip())
        if match and not line.startswith(" "):
            return match.group(1)[:100]
    return "an exception"


def goal_arg(args: str | None) -> str:
    """The goal id a row's stored ``args`` name ("" when they name none)."""
    try:
        value = ast.literal_eval(args or "")
    except (ValueError, SyntaxError):
        return ""
    value = value[0] if isinstance(value, tuple) and value else value
    return str(value)
