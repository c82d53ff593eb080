"""The liveness check on one goal: what the sweeper (every minute) and the
doctor's repair (every hour, or an operator's ``ledger doctor --fix``) run
once a goal's deadline passed. The domain decides (``CheckLiveness``); the
goal's schedule rows are the facts it is decided on (``schedules.row_facts``)."""

from datetime import datetime
from typing import Any

from ledger.domain import GoalState
from ledger.domain.overdue import CheckLiveness, expected_schedules
from ledger.services.caller import Caller, Outcome, run
from ledger.services.schedules import row_facts

SCHEDULER = "scheduler"


def check(goal_id: str, *, rows: tuple[Any, ...] = (), orphans: tuple[str, ...] = (),
          actor: str = SCHEDULER,
          unheard: tuple[datetime, datetime] | None = None) -> Outcome:
    """Act on the goal's passed deadlines. An operator's repair (``actor``
    operator) repairs a wake the scheduler stopped repairing (WAKE_NOT_FIRING);
    ``unheard``: the window of the sweeper's last silence, if recent."""
    return run(Caller(actor), goal_id, CheckLiveness(rows=rows, orphans=orphans,
                                                     by_operator=actor == "operator",
                                                     unheard=unheard))


def check_goal(goal_id: str, state: GoalState, *, actor: str = SCHEDULER,
               orphans: tuple[str, ...] = (),
               unheard: tuple[datetime, datetime] | None = None) -> Outcome:
    """``check``, with the goal's schedule rows (those its state expects) as facts."""
    rows = row_facts(goal_id, set(expected_schedules(state)))
    return check(goal_id, rows=rows, orphans=orphans, actor=actor, unheard=unheard)
