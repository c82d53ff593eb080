"""Wake timing and liveness (docs/design.md, "Wakes and claims"), each decided
here and nowhere else.

- **Slots.** A recurring watchdog fires at ``anchor + k x interval``. The
  anchor is the first due time (internal) or the host receipt's ``due_at``
  (host), and no claim moves it: a late pickup, a busy worker or an early
  fire never shifts the slots after it. One exception, for host goals only:
  a host whose early fires come a whole number of intervals apart fires on
  its own schedule, and its fire becomes the anchor (``claims.reanchor``).
- **Next wake.** When the next wake will really fire: the earliest of the
  pending one-off wakes and the watchdog's next slot.
- What each goal waits for and by when is ``ledger.domain.liveness``.
"""

from datetime import datetime, timedelta
from math import ceil, floor

from ledger.domain.parts import OneOffWake, Watchdog
from ledger.domain.state import PAUSED, GoalState

# Watchdog statuses under which the scheduler will fire it.
FIRING = frozenset({"requested", "live"})
# How early a fire may come and still be on time. Host schedulers fire up to
# half a minute early; internal wakes carry their slot, so are never early.
EARLY_TOLERANCE_SECONDS = 60


def slot_of(watchdog: Watchdog | None, moment: datetime) -> datetime | None:
    """The slot a fire at ``moment`` belongs to: the nearest one. A fire up to
    half an interval early belongs to the coming slot; a late fire to the slot
    it was meant for."""
    if watchdog is None:
        return None
    start, interval = watchdog.start, watchdog.interval_seconds
    if start is None or not interval:
        return None
    k = max(0, floor((moment - start).total_seconds() / interval + 0.5))
    return start + timedelta(seconds=k * interval)


def slot_after(watchdog: Watchdog | None, moment: datetime) -> datetime | None:
    """The first slot strictly after ``moment``."""
    if watchdog is None:
        return None
    start, interval = watchdog.start, watchdog.interval_seconds
    if start is None or not interval:
        return None
    if moment < start:
        return start
    k = floor((moment - start).total_seconds() / interval) + 1
    return start + timedelta(seconds=k * interval)


def early_by(watchdog: Watchdog | None, slot: datetime, now: datetime) -> float:
    """Seconds a fire at ``now`` comes before ``slot`` beyond the tolerance (0: on time)."""
    interval = watchdog.interval_seconds if watchdog is not None else 0
    tolerance = min(EARLY_TOLERANCE_SECONDS, interval / 2)
    return max(0.0, (slot - now).total_seconds() - tolerance)


# How far two early host fires may miss a whole number of intervals apart and
# still show one consistent offset (``claims.reanchor``): a host's own jitter
# and lateness, a few minutes, never more than an eighth of the interval (so
# a host firing too often never passes for one on its own schedule).
REANCHOR_TOLERANCE_SECONDS = 600


def reanchor_tolerance(watchdog: Watchdog) -> float:
    return min(REANCHOR_TOLERANCE_SECONDS, watchdog.interval_seconds / 8)


def paused(state: GoalState) -> bool:
    """Paused by a rate limit until ``paused_until`` (past it or not)."""
    return state.status == PAUSED and bool(state.paused_until)


def pause_left(state: GoalState, now: datetime) -> int:
    """Whole seconds (rounded up) until a rate-limited goal's pause ends; 0 when
    it is not paused or its reset has passed. The one rule for "paused, not
    yet due": a lease, a wake and a pull all wait for it."""
    if not paused(state):
        return 0
    return max(0, ceil((state.paused_until - now).total_seconds()))  # type: ignore[operator]


def next_wake_at(state: GoalState) -> datetime | None:
    """When the next wake will fire, or None when none will: the earliest
    of the pending one-off wakes and the firing watchdog's next slot."""
    if state.terminal:
        return None
    candidates = [wake.due_at for wake in one_off_wakes(state)]
    watchdog = state.watchdog
    if watchdog is not None and watchdog.status in FIRING and watchdog.next_due_at:
        candidates.append(watchdog.next_due_at)
    return min(candidates) if candidates else None


def one_off_wakes(state: GoalState) -> list[OneOffWake]:
    """The pending one-off wakes: at a rate-limit reset, or asked for by the agent."""
    return [wake for wake in (state.reset_wake, state.requested_wake) if wake is not None]


def nothing_fires(state: GoalState) -> bool:
    """Nothing will move this goal by itself: no lease, no due wake waiting for
    its agent, no pending one-off wake and no watchdog that will fire (an
    internal one fires once requested; a host one only once confirmed live)."""
    if (state.terminal or state.lease is not None or state.ready is not None
            or one_off_wakes(state)):
        return False
    watchdog = state.watchdog
    return watchdog is None or not (
        watchdog.status == "live"
        or (watchdog.status == "requested" and watchdog.backend == "internal"))
