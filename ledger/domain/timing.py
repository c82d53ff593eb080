"""Wake timing and liveness (DESIGN section 6), each decided here and nowhere else.

- **Slots.** A recurring watchdog fires at ``anchor + k x interval``. The
  anchor is the first due time (internal) or the host receipt's ``due_at``
  (host), and no claim ever moves it: a late pickup, a busy worker or an early
  fire never shifts the slots after it.
- **Next wake.** When the next wake will really fire: the earliest of the
  pending one-off wakes and the watchdog's next slot.
- **Liveness.** Every non-terminal goal is working, scheduled, ready or
  needs a human; ``liveness`` says which, or ``None`` for a goal that is
  silently stuck (a bug ``ledger doctor`` lists).
"""

from datetime import datetime, timedelta
from math import floor

from ledger.domain.events import iso
from ledger.domain.state import BLOCKED, FAILED, GoalState

# Watchdog statuses under which the scheduler will fire it.
FIRING = frozenset({"requested", "live"})
WORKING, SCHEDULED, READY, NEEDS_HUMAN, TERMINAL = (
    "working", "scheduled", "ready", "needs_human", "terminal")
LIVENESS_STATES = (WORKING, SCHEDULED, READY, NEEDS_HUMAN)
# How early a fire may come and still be on time. Host schedulers fire up to
# half a minute early; internal wakes carry their slot, so are never early.
EARLY_TOLERANCE_SECONDS = 60


def anchor(watchdog: dict) -> datetime | None:
    value = watchdog.get("anchor") or watchdog.get("first_due_at")
    return datetime.fromisoformat(value) if value else None


def slot_of(watchdog: dict, moment: datetime) -> datetime | None:
    """The slot a fire at ``moment`` belongs to: the nearest one. A fire up to
    half an interval early belongs to the coming slot; a late fire to the slot
    it was meant for."""
    start, interval = anchor(watchdog), watchdog.get("interval_seconds", 0)
    if start is None or not interval:
        return None
    k = max(0, floor((moment - start).total_seconds() / interval + 0.5))
    return start + timedelta(seconds=k * interval)


def slot_after(watchdog: dict, moment: datetime) -> datetime | None:
    """The first slot strictly after ``moment``."""
    start, interval = anchor(watchdog), watchdog.get("interval_seconds", 0)
    if start is None or not interval:
        return None
    if moment < start:
        return start
    k = floor((moment - start).total_seconds() / interval) + 1
    return start + timedelta(seconds=k * interval)


def early_by(watchdog: dict, slot: datetime, now: datetime) -> float:
    """Seconds a fire at ``now`` comes before ``slot`` beyond the tolerance (0: on time)."""
    tolerance = min(EARLY_TOLERANCE_SECONDS, watchdog.get("interval_seconds", 0) / 2)
    return max(0.0, (slot - now).total_seconds() - tolerance)


def next_wake_at(state: GoalState) -> str:
    """When the next wake will fire (ISO), or "" when none will: the earliest
    of the pending one-off wakes and the firing watchdog's next slot."""
    if state.terminal:
        return ""
    candidates = [wake["due_at"] for wake in one_off_wakes(state)]
    if state.watchdog.get("status") in FIRING and state.watchdog.get("next_due_at"):
        candidates.append(state.watchdog["next_due_at"])
    return min(candidates, key=datetime.fromisoformat) if candidates else ""


def one_off_wakes(state: GoalState) -> list[dict]:
    """The pending one-off wakes: at a rate-limit reset, or asked for by the agent."""
    return [wake for wake in (state.reset_wake, state.requested_wake) if wake.get("due_at")]


# Ended goals an operator should still look at (recover takes AUTH_FAILED).
FAILURES_FOR_A_HUMAN = frozenset({"AUTH_FAILED", "OWNER_VERIFICATION"})
PENDING_CLEANUP = "PENDING_NATIVE_CLEANUP"


def needs_human(state: GoalState) -> bool:
    """Listed in /alerts and on the dashboard: blocked, finishing but waiting
    for a host watchdog's cancellation receipt, or failed in a way a human
    must fix. ``api.alerts`` queries the same three with these constants."""
    if state.terminal:
        return state.status == FAILED and state.reason in FAILURES_FOR_A_HUMAN
    return state.status == BLOCKED or bool(state.finish_requested)


def liveness(state: GoalState, now: datetime) -> str | None:
    """Which of the four liveness states a goal is in ("terminal" for an ended
    goal), or None: silently stuck, nothing will ever move it."""
    if state.terminal:
        return TERMINAL
    if needs_human(state):
        return NEEDS_HUMAN
    if state.lease:
        return WORKING  # a lapsed lease is the sweeper's to expire, within a minute
    if state.ready:
        return READY
    if one_off_wakes(state):
        return SCHEDULED
    watchdog = state.watchdog
    if watchdog.get("status") == "live" or (watchdog.get("status") == "requested"
                                            and watchdog.get("backend") == "internal"):
        return SCHEDULED
    return None


def due_iso(moment: datetime, seconds: float) -> str:
    return iso(moment + timedelta(seconds=seconds))
