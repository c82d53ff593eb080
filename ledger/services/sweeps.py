"""The liveness check on one goal: what the sweeper (every minute) and the
doctor's repair (every hour, or an operator's ``ledger doctor --fix``) run
once a goal's deadline passed. The domain decides (``CheckLiveness``); the
caller brings the facts it gathered (the goal's schedule rows)."""

from datetime import datetime
from typing import Any

from ledger.domain.overdue import CheckLiveness
from ledger.eventstore import store
from ledger.eventstore.store import Outcome

SCHEDULER = "scheduler"


def check(goal_id: str, *, rows: tuple[Any, ...] = (), orphans: tuple[str, ...] = (),
          actor: str = SCHEDULER,
          unheard: tuple[datetime, datetime] | None = None) -> Outcome:
    """Act on the goal's passed deadlines. An operator's repair (``actor``
    operator) repairs a wake the scheduler stopped repairing (WAKE_NOT_FIRING);
    ``unheard``: the window of the sweeper's last silence, if recent."""
    return store.execute(goal_id, CheckLiveness(rows=rows, orphans=orphans,
                                                by_operator=actor == "operator",
                                                unheard=unheard), actor=actor)
