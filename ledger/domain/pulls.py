"""Pulls (the continuation budget): the agent's own lease call on a goal with a due wake
takes it, and a recovery continuation is charged once, whichever came first."""

from dataclasses import replace
from datetime import datetime

from ledger.domain import timing
from ledger.domain.endings import GoalBlocked
from ledger.domain.events import Event
from ledger.domain.leases import acquire_events
from ledger.domain.parts import iso_text
from ledger.domain.runs import budget_block, budget_spent_why, charge_event
from ledger.domain.state import GoalState


def pull_events(state: GoalState, holder: str, token_sha256: str, now: datetime) -> list[Event]:
    """The agent's own lease call on a goal with a due wake (ready, or paused
    past its reset before the reset wake fired): it takes the lease, and a
    recovery continuation is charged (the continuation budget) — once, whichever came first."""
    if state.ready is not None:
        pulled = {"occurrence_id": state.ready.occurrence_id, "reason": state.ready.reason}
        charge = state.ready.charge
    else:
        pulled = {"occurrence_id": f"pull:reset:{iso_text(state.paused_until)}",
                  "reason": "rate_limit_reset"}
        charge = True
    events = []
    if charge:
        block = budget_block(state)
        if block:
            return [Event(GoalBlocked(summary=budget_spent_why(state, block), generation=0,
                                      reason=block), now)]
        events.append(charge_event(state, pulled["occurrence_id"], now))
    grant = acquire_events(state, holder, token_sha256, now, via="pull")
    grant[-1] = Event(replace(grant[-1].payload, pulled=pulled), now)
    return events + grant


def due_for_pull(state: GoalState, now: datetime) -> bool:
    """A lease call now resumes a due wake: the goal is ready, or paused past
    its reset with the reset wake not fired yet."""
    if state.ready is not None:
        return True
    return timing.paused(state) and not timing.pause_left(state, now)
