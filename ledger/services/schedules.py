"""The rows the ledger keeps in django-q2's schedule table, named once.

A goal's wakes are django-q2 ``Schedule`` rows: its one recurring watchdog
(``wakeledger-watchdog-<goal>``), the one-off wake at a rate-limit reset
(``wakeledger-reset-<goal>``) and the one-off wake the agent asked for
(``wakeledger-wake-<goal>``). ``followup.follow_schedules`` creates and
deletes them in the transaction of the command whose events call for them
(one of the steps ``caller.follow_up`` lists), so a schedule exists exactly
when the committed events say so, whichever shell ran the command.

The tasks those rows run are named here by their dotted paths: the strings
django-q2 stores and its workers import (the ``scheduling`` app defines the
functions; tests/scheduling/test_task_paths.py checks that each path resolves).
The doctor checks the rows by content against these names (``row_facts``).
"""

import ast
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone
from django_q.models import Schedule, Task

from ledger.domain import housekeeping
from ledger.domain.events import iso
from ledger.domain.overdue import ScheduleRow
from ledger.eventstore import clock
from ledger.services import alerts

# The django-q2 tasks and rows the ledger relies on.
FIRE = "scheduling.tasks.fire_watchdog"
SWEEP = "scheduling.tasks.sweep_leases"
SWEEPER_NAME = "wakeledger-lease-sweeper"
REPAIR = "scheduling.maintenance.repair_schedules"
REPAIR_NAME = "wakeledger-schedule-repair"
SEND_NOTIFICATIONS = "scheduling.notify.send"

TASK_PATHS = (FIRE, SWEEP, REPAIR, SEND_NOTIFICATIONS)


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


# ---------------------------------------------------------------- the scheduler's own rows


@dataclass(frozen=True)
class SystemRow:
    """One of the scheduler's own recurring rows, and what is lost without it."""

    code: str  # the findings' prefix: sweeper_missing, repair_misscheduled, ...
    name: str
    func: str
    every: timedelta
    loss: str


def system_rows() -> tuple[SystemRow, ...]:
    # Read at call time: tests and deployments change the sweep interval.
    return (
        SystemRow("sweeper", SWEEPER_NAME, SWEEP,
                  timedelta(minutes=settings.WAKELEDGER_SWEEP_MINUTES),
                  "no lease expires and no deadline is acted on"),
        SystemRow("repair", REPAIR_NAME, REPAIR, timedelta(hours=1),
                  "no hourly repair runs, and nothing restores the sweeper's row"),
    )


def system_row_problem(spec: SystemRow, now: datetime, *, scheduler_runs: bool) -> tuple[str, str]:
    """(``missing`` or ``misscheduled`` or "", why) for one of the scheduler's rows."""
    row = Schedule.objects.filter(name=spec.name).first()
    if row is None or row.func != spec.func or row.repeats == 0:
        return "missing", f"django-q2 row {spec.name} is missing or exhausted"
    # django-q2 fires by the wall clock; the ledger's may be frozen (tests)
    # or simulated: the domain judges by both.
    problem = housekeeping.timing_problem(row.next_run, spec.every, (now, timezone.now()),
                                          scheduler_runs=scheduler_runs)
    if problem:
        return "misscheduled", (f"django-q2 row {spec.name} "
                                f"{housekeeping.describe(problem, row.next_run, spec.every)}")
    return "", ""


def _scheduler_runs(now: datetime) -> bool:
    try:
        with transaction.atomic():  # a savepoint: PostgreSQL goes on after an error
            return alerts.scheduler_health(now)["status"] == "ok"
    except DatabaseError:
        # post_migrate after a partial migrate: no heartbeat table yet.
        return False


def ensure_sweeper(*, force: bool = False, only_if_wrong: bool = False, **_: Any) -> None:
    """The lease sweeper's row, kept in step with the settings (post_migrate,
    and ``fix``): without it no lease expires and no deadline is acted on.
    A row that exists but will not fire soon (its next run years ahead, or
    long past while the scheduler runs) is due again at once; with
    ``only_if_wrong`` a row that will fire is not written at all."""
    [spec, _repair] = system_rows()
    _ensure(spec, {"schedule_type": Schedule.MINUTES,
                   "minutes": settings.WAKELEDGER_SWEEP_MINUTES},
            only_if_wrong=only_if_wrong, force=force)


def ensure_repair(*, force: bool = False, **_: Any) -> None:
    """The hourly ``doctor --fix``'s row (post_migrate, and the sweeper every
    ten minutes: two one-row reads when it is there and due in time)."""
    [_sweeper, spec] = system_rows()
    _ensure(spec, {"schedule_type": Schedule.HOURLY}, only_if_wrong=True, force=force)


def _ensure(spec: SystemRow, settings_: dict[str, Any], *, only_if_wrong: bool = False,
            force: bool = False) -> None:
    now = clock.now()
    problem = "missing" if force else system_row_problem(
        spec, now, scheduler_runs=_scheduler_runs(now))[0]
    if only_if_wrong and not problem:
        return
    defaults = {"func": spec.func, "repeats": -1, **settings_}
    if problem:
        # Due at once by both clocks (django-q2 fires by the wall clock).
        defaults["next_run"] = min(now, timezone.now())
    Schedule.objects.update_or_create(name=spec.name, defaults=defaults)
