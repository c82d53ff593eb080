"""Who needs a human, and whether the scheduler still runs: one list for
GET /alerts, ``ledger alerts``, ``ledger doctor`` and the admin's dashboard.

A goal is listed when ``ledger.domain.liveness.alert`` names a reason: one the
state records (blocked, pending cleanup, HOST_SILENT, JOB_SILENT, failed in a
way a human must fix; the indexed ``attention`` column), or OVERDUE — its
deadline passed more than two sweeps ago and nothing recorded why (the
indexed ``deadline_at`` column). The second case is what keeps the promise
when the sweeper itself is down: a goal is never stuck past its deadline
without being listed.
"""

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet

from ledger import clock
from ledger.domain import GoalState, liveness
from ledger.domain.events import iso
from ledger.domain.state import ACTIVE_STATUSES
from ledger.models import Goal, SchedulerBeat

LIMIT = 500
# The sweeper beats every WAKELEDGER_SWEEP_MINUTES; three missed beats (at
# least three minutes) mean no scheduler runs it.
SWEEPER = "sweeper"


def needing_a_human(goals: QuerySet[Goal], now: datetime) -> QuerySet[Goal]:
    # liveness.alert as a query: the stored attention, or liveness.overdue.
    overdue = Q(deadline_at__lt=liveness.overdue_cutoff(now), status__in=ACTIVE_STATUSES)
    return goals.filter(~Q(attention="") | overdue)


def alerts(goals: QuerySet[Goal], now: datetime | None = None) -> list[dict[str, Any]]:
    """The goals that need a human, newest first (at most 500)."""
    now = now or clock.now()
    rows = needing_a_human(goals, now).order_by("-updated_at")[:LIMIT]
    result = []
    for goal in rows:
        state = GoalState.from_dict(goal.state)
        reason = liveness.alert(state, now)
        if not reason:
            continue  # moved on between the query's snapshot and this read
        expected = liveness.expectation(state)
        result.append({
            "id": str(goal.pk), "goal_key": goal.goal_key, "workspace": goal.workspace,
            "agent": goal.agent, "status": goal.status, "reason": reason,
            "why": liveness.why(reason), "since": _since(state, reason, expected),
            "expected": expected.as_dict(),
        })
    return result


def _since(state: GoalState, reason: str, expected: liveness.Expectation) -> str:
    """Since when the goal needs a human: the missed host deadline, the passed
    deadline of an OVERDUE goal, or its last event (it blocked, it failed)."""
    if reason == liveness.HOST_SILENT and state.liveness_alert.get("at"):
        return state.liveness_alert["at"]
    if reason == liveness.OVERDUE_REASON and expected.deadline is not None:
        return iso(expected.deadline)
    return state.updated_at


def beat(name: str = SWEEPER) -> None:
    """The scheduler's heartbeat: written by the sweeper on every pass."""
    # One UPDATE a minute; the row is created once.
    now = clock.now()
    if not SchedulerBeat.objects.filter(name=name).update(at=now):
        SchedulerBeat.objects.get_or_create(name=name, defaults={"at": now})


def scheduler_health(now: datetime | None = None) -> dict[str, Any]:
    """Whether the scheduler still runs: ok, silent (no sweep for three
    intervals) or never_ran (no qcluster has swept this database yet)."""
    now = now or clock.now()
    last = SchedulerBeat.objects.filter(name=SWEEPER).values_list("at", flat=True).first()
    limit = timedelta(minutes=3 * settings.WAKELEDGER_SWEEP_MINUTES)
    status = "never_ran" if last is None else ("ok" if now - last <= limit else "silent")
    return {"status": status, "last_sweep_at": iso(last) if last else None,
            "why": {"ok": "", "never_ran": "no scheduler (manage.py qcluster) has run the lease "
                                          "sweeper on this database yet",
                    "silent": f"the lease sweeper has not run for over {limit}: is the "
                              "scheduler (manage.py qcluster) running?"}[status]}
