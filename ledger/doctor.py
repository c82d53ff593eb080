"""``ledger doctor``: goals that nothing will ever move, and other cheap
inconsistencies between the projection and the scheduler's rows.

Liveness (DESIGN section 6): every non-terminal goal is working, scheduled,
ready or needs a human — ``ledger.domain.timing.liveness`` decides which. A
goal in none of them is silently stuck: a bug, listed here and on the admin's
stuck-goals dashboard. The schedule checks compare the internal watchdogs and
one-off wakes the projections say exist with the django-q2 rows that would
fire them, both ways.
"""

from collections.abc import Iterator
from dataclasses import dataclass

from django_q.models import Schedule

from ledger import clock
from ledger.domain import GoalState
from ledger.domain.state import ACTIVE_STATUSES
from ledger.domain.timing import FIRING, liveness
from ledger.models import Goal

PREFIXES = ("wakeledger-watchdog-", "wakeledger-reset-", "wakeledger-wake-")


@dataclass(frozen=True)
class Finding:
    goal_id: str
    problem: str  # a stable code: orphan, schedule_missing, schedule_orphaned
    detail: str


def expected_schedules(state: GoalState) -> set[str]:
    """The django-q2 rows this goal's projection says exist."""
    names = set()
    if (state.watchdog.get("backend") == "internal"
            and state.watchdog.get("status") in FIRING and state.watchdog.get("schedule_name")):
        names.add(state.watchdog["schedule_name"])
    for wake in (state.reset_wake, state.requested_wake):
        if wake.get("schedule_name") and wake.get("due_at"):
            names.add(wake["schedule_name"])
    return names


def findings(goal_ids: list[str] | None = None) -> Iterator[Finding]:
    now = clock.now()
    goals = Goal.objects.filter(status__in=ACTIVE_STATUSES)
    if goal_ids:
        goals = goals.filter(pk__in=goal_ids)
    rows = set(Schedule.objects.filter(
        name__regex=r"^wakeledger-(watchdog|reset|wake)-").values_list("name", flat=True))
    expected: set[str] = set()
    for goal_id, raw in goals.values_list("id", "state").iterator(chunk_size=500):
        state = GoalState.from_dict(raw)
        if liveness(state, now) is None:
            yield Finding(str(goal_id), "orphan",
                          f"{state.status}: no lease, no due or scheduled wake, not blocked "
                          "- nothing will ever move it")
        names = expected_schedules(state)
        expected |= names
        for name in sorted(names - rows):
            yield Finding(str(goal_id), "schedule_missing",
                          f"the projection has a live wake {name} but no django-q2 row "
                          "will fire it")
    if goal_ids:
        return
    for name in sorted(rows - expected):
        goal_id = next((name[len(p):] for p in PREFIXES if name.startswith(p)), "")
        yield Finding(goal_id, "schedule_orphaned",
                      f"django-q2 row {name} fires for a goal whose projection has no such "
                      "live wake")
