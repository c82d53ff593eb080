"""Who runs a use case, and how a use case runs a domain command as them.

``Caller`` is who asks: an agent sees only its own goals (``owner``; the rule
is ``GoalState.seen_by``), checked by the store on the row it locks, so a use
case costs no separate read. ``run`` is the one way a use case sends a
command through the store: it is not for the shells, which call use cases
(``tests/test_layers.py`` keeps them away from the store and the commands).
"""

import uuid
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from ledger.domain import GoalState
from ledger.eventstore import store
from ledger.eventstore.store import GoalNotFound, Outcome

__all__ = ["Caller", "GoalNotFound", "Outcome", "as_a_whole", "canonical_id", "one_transaction",
           "run", "state_of"]

canonical_id = store.canonical_id
# For a shell whose transaction fails as a whole around the use cases it
# calls (the Idempotency-Key's): their commands take no savepoint of their own.
as_a_whole = store.as_a_whole


def one_transaction() -> AbstractContextManager[Any]:
    """The transaction of a shell whose request is one unit around the use
    cases it calls (the Idempotency-Key's): Django's own ``atomic()``."""
    return transaction.atomic()


@dataclass(frozen=True, slots=True)
class Caller:
    """Who runs a use case: the actor recorded on its events, the agent whose
    goals alone it may touch (None: an operator or the scheduler sees all),
    and the request's Idempotency-Key."""

    name: str
    owner: str | None = None
    idempotency_key: str | None = None


def run(caller: Caller, goal_id: str | uuid.UUID, command: Any) -> Outcome:
    """One command on a goal this caller may see (GoalNotFound otherwise)."""
    return store.execute(goal_id, command, actor=caller.name, owner=caller.owner,
                         idempotency_key=caller.idempotency_key)


def state_of(caller: Caller, goal_id: str | uuid.UUID) -> GoalState:
    """A goal's state, if this caller may see it (GoalNotFound otherwise)."""
    state = store.load(goal_id)
    if not state.seen_by(caller.owner):
        raise GoalNotFound(f"no goal {goal_id}")
    return state
