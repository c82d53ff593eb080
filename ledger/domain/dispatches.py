"""Dispatch results (the uncertain-attempt rule): what a dispatcher did with a granted wake's
lease. One that certainly started nothing gives the lease back at once."""

from dataclasses import dataclass
from datetime import datetime

from ledger.domain import validation
from ledger.domain.codec import Payload, event_kind, optional
from ledger.domain.events import Changes, Event, Style
from ledger.domain.leases import LeaseReleased
from ledger.domain.state import GoalState
from ledger.domain.text import clean, known


@dataclass(frozen=True, slots=True)
class RecordDispatch:
    """What a dispatcher did with a granted internal wake."""

    occurrence_id: str
    dispatcher: str
    ok: bool
    detail: str = ""  # a sanitized outcome: HTTP status, exit of the spawn, error class
    # When not ok: True if the continuation may have started anyway (a
    # timeout after the request was sent); False if it certainly did not.
    uncertain: bool = False
    generation: int = 0  # the lease generation the dispatch carried


def dispatched(state: GoalState, cmd: RecordDispatch, now: datetime) -> list[Event]:
    result = ContinuationDispatched(
        occurrence_id=validation.text(cmd.occurrence_id, "occurrence_id", limit=300,
                                      required=True),
        dispatcher=validation.text(cmd.dispatcher, "dispatcher", limit=64, required=True),
        ok=bool(cmd.ok),
        detail=validation.text(cmd.detail, "detail", limit=500),
        uncertain=None if cmd.ok else bool(cmd.uncertain),
    )
    events = [Event(result, now)]
    if (not cmd.ok and not cmd.uncertain and state.lease is not None
            and state.lease.generation == cmd.generation):
        # The uncertain-attempt rule: a dispatch that certainly started nothing is not uncertain.
        # Its lease goes at once and the goal waits for the next wake (the
        # charge is not refunded: the budget bounds attempts, not successes).
        events.append(Event(LeaseReleased(generation=cmd.generation,
                                          why=f"dispatch failed: {result.detail}"), now))
    return events


def dispatches(state: GoalState) -> bool:
    """Whether the goal's wakes are sent through the outbox: it names a dispatcher."""
    return state.setting("dispatch") != "none"


def superseded(state: GoalState, generation: int) -> bool:
    """Whether a dispatch recorded for ``generation`` (0: a ready wake's
    notification, which carries no lease) would only be refused if sent now:
    the goal ended, its continuation's lease is gone, or the ready wake was
    pulled already (an operator acted, the agent came back)."""
    if state.terminal:
        return True
    if generation == 0:
        return state.ready is None
    return state.lease is None or state.lease.generation != generation


def lapsed_unsent(state: GoalState, generation: int, now: datetime) -> bool:
    """Whether a dispatch still waiting in the outbox hands over a lease that
    has already expired: no sender took it in time (the scheduler was down
    when an operator's wake was granted from the web, or right after a claim).
    Nobody ever received that lease, so nothing can have started — the uncertain-attempt rule's
    "uncertain" does not apply: it is a dispatch that certainly started
    nothing (``dispatched`` then frees the lease), not INTERRUPTED_UNKNOWN."""
    lease = state.lease
    return (generation > 0 and lease is not None and lease.generation == generation
            and now >= lease.expires_at)



@event_kind("continuation.dispatched")
@dataclass(frozen=True, slots=True, kw_only=True)
class ContinuationDispatched(Payload):
    STYLE = Style("continuation")

    occurrence_id: str
    dispatcher: str
    ok: bool
    detail: str
    uncertain: bool | None = optional()  # when not ok

    def fold(self, state: GoalState, at: datetime) -> Changes:
        return {}  # history only: a failed dispatch's release is its own event

    def line(self) -> str:
        result = "ok" if self.ok else "uncertain" if self.uncertain else "failed"
        detail = f" ({clean(known(self.detail), 60)})" if self.detail else ""
        return f"via {clean(known(self.dispatcher))}: {result}{detail}"
