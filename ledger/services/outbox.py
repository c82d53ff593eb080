"""The dispatch outbox's rows, written by the command that calls for them.

A granted push wake's claim writes a ``pending`` row next to its events, in
its transaction (``record``, one of the steps ``caller.follow_up`` lists);
the scheduler's sender (``scheduling.outbox``) sends it after the commit.
"""

import logging
from dataclasses import dataclass

from ledger.domain.dispatches import dispatches
from ledger.domain.kinds import WakeClaimed
from ledger.eventstore import clock
from ledger.eventstore.store import Outcome
from ledger.models import Dispatch
from ledger.project import requestid

# The outbox's lines, written here or by its sender, under one name.
logger = logging.getLogger("scheduling.outbox")

# A claim's outcomes that hand a wake on: its lease granted (a push wake
# carries it), or ready for the agent to pull.
GRANTED = "recurring_acquired"
PULLABLE = "ready_for_pull"


def record(outcome: Outcome) -> None:
    """A wake to dispatch gets its outbox row in the command's transaction."""
    goal_id = outcome.state.goal_id
    for order in orders(outcome):
        Dispatch.objects.create(goal_id=goal_id, occurrence_id=order.occurrence_id,
                                dispatcher=order.dispatcher, generation=order.generation,
                                created_at=clock.now(), request_id=requestid.current())
        logger.info("dispatch %s of goal %s via %s: in the outbox", order.occurrence_id,
                    goal_id, order.dispatcher)


@dataclass(frozen=True)
class Order:
    """An outbox row a committed claim needs: which wake, through which
    dispatcher, handing over which lease generation (0: a notification)."""

    occurrence_id: str
    dispatcher: str
    generation: int


def orders(outcome: Outcome) -> list[Order]:
    """What a command's outcome asks the outbox to send (asked inside the
    command's transaction, ``record``): a granted push wake
    hands over its lease; a ready wake of a dispatcher that carries no lease
    (OpenClaw's Gateway) is a notification, and its agent pulls the lease."""
    if not dispatches(outcome.state):
        return []
    name = outcome.state.setting("dispatch")
    found = []
    for event in outcome.events:
        claim = event.payload
        if not isinstance(claim, WakeClaimed) or claim.source not in ("internal", "operator"):
            continue
        if claim.outcome == GRANTED:
            generation = outcome.state.lease["generation"]
        elif claim.outcome == PULLABLE:
            generation = 0
        else:
            continue
        found.append(Order(claim.occurrence_id, name, generation))
    return found
