"""The uncertain-attempt rule, decided once for every path (a claim, the sweeper): a continuation
that was handed over and went silent is INTERRUPTED_UNKNOWN, never retried
blindly."""

from datetime import datetime

from ledger.domain.endings import GoalBlocked
from ledger.domain.events import Event, iso
from ledger.domain.leases import LeaseExpired, Unheard, lease_stale_at
from ledger.domain.state import GoalState


def interrupted(state: GoalState, now: datetime, unheard: Unheard = None) -> bool:
    """The uncertain-attempt rule, decided here for every path (claim, sweeper): a continuation
    that was handed over (dispatched, or its lease taken by a claimant or a
    pull) went silent past its lease and stale grace, with no heartbeat,
    checkpoint or outcome. A blocking job it tracked is no sign of life: a
    holder that waits on one heartbeats (docs/design.md, "Wakes and claims"). Silence is only
    what the server could have heard: a lease that went stale while it could
    not (``unheard``) gets the reconnect grace first, on every path."""
    stale_at = lease_stale_at(state, unheard)
    lease = state.lease
    return (stale_at is not None and lease is not None and now >= stale_at
            and lease.via in ("wake", "pull") and not lease.active)


def interrupted_events(state: GoalState, now: datetime) -> list[Event]:
    why = ("the last continuation's lease expired without a heartbeat, checkpoint or "
           "outcome: INTERRUPTED_UNKNOWN")
    return [lease_expired_event(state, now),
            Event(GoalBlocked(summary=why, generation=0, reason="INTERRUPTED_UNKNOWN"), now)]


def lease_expired_event(state: GoalState, now: datetime) -> Event:
    lease = state.lease
    assert lease is not None, "a lease to expire"
    return Event(LeaseExpired(generation=lease.generation, holder=lease.holder,
                              expired_at=iso(lease.expires_at)), now)
