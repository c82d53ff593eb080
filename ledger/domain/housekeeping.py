"""The scheduler's own recurring rows (the lease sweeper's, the hourly repair's):
is a row's next run where a row that fires can be?

A recurring django-q2 row fires when its ``next_run`` passes and moves it one
interval on, so a row that fires is never more than one interval ahead, and a
row the running scheduler looks at (every 30 s) is never long behind. Checking
only that the row exists missed a row due years from now: it never fired, the
heartbeat went silent, and the health check blamed a qcluster that ran.

Pure: the shell passes the row's facts and the clocks. django-q2 fires by the
wall clock, the ledger decides by its own (the same in production; frozen or
simulated in tests and the simulation), so a row is off only when it is off
by every clock it is given — a repair never moves a row that is right by one.
"""

from collections.abc import Iterable
from datetime import datetime, timedelta

from ledger.domain.liveness import SCHEDULER_LATENESS

UNSCHEDULED = "unscheduled"  # no next run: django-q2 never fires it
FAR_AHEAD = "far_ahead"  # due later than one interval (and the lateness) from now
BEHIND = "behind"  # due long ago while the scheduler runs: nothing fires it


def timing_problem(next_run: datetime | None, every: timedelta, clocks: Iterable[datetime],
                   *, scheduler_runs: bool) -> str:
    """Why the row's next run is not where a firing row's is, or ""."""
    if next_run is None:
        return UNSCHEDULED
    nows = list(clocks)
    if all(next_run > now + every + SCHEDULER_LATENESS for now in nows):
        return FAR_AHEAD
    # With no scheduler running every row falls behind; that is the
    # scheduler's problem (reported as such), not the row's.
    if scheduler_runs and all(next_run < now - SCHEDULER_LATENESS for now in nows):
        return BEHIND
    return ""


def describe(problem: str, next_run: datetime | None, every: timedelta) -> str:
    """The finding's words for ``timing_problem``'s answer."""
    when = next_run.isoformat() if next_run else "never"
    return {UNSCHEDULED: "has no next run, so it never fires",
            FAR_AHEAD: f"is next due {when}, more than its interval ({every}) away: it will "
                       "not fire until then",
            BEHIND: f"was due {when} and the running scheduler has not fired it"}[problem]
