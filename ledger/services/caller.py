"""Who runs a use case, and the one way a use case runs a domain command.

``Caller`` is who asks: an agent sees only its own goals (``owner``; the rule
is ``GoalState.seen_by``), checked by the store on the row it locks, so a use
case costs no separate read.

``run`` (and ``start``, for the command that creates a goal) is the one way
every use case sends a command: it opens the command's transaction (or joins
the caller's, see below), lets the store lock, decide and append, and then
writes what the decision causes beyond its events, in the listed step
``follow_up``. All of it commits together or not at all. It is not for the
shells, which call use cases (``tests/test_layers.py`` keeps them away from
the store and the commands).

A shell whose request is one unit around the use cases it calls (the
Idempotency-Key's: the key's record and the command commit together) opens
Django's ``transaction.atomic()`` around them; the use case's block then
joins that transaction without a savepoint of its own (``savepoint=False``):
it fails as a whole with the request, which rolls back on any error it lets
through. A refusal (a ``DomainError``) is decided before anything is written
and leaves the transaction usable, for a caller that answers it and goes on.
"""

import uuid
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from ledger.domain import DomainError, GoalState, RunGoal, StartGoal
from ledger.eventstore import store
from ledger.eventstore.store import GoalNotFound, Outcome
from ledger.services import followup

__all__ = ["Caller", "GoalNotFound", "Outcome", "canonical_id", "follow_up", "run", "start",
           "state_of"]

canonical_id = store.canonical_id


@dataclass(frozen=True, slots=True)
class Caller:
    """Who runs a use case: the actor recorded on its events, the agent whose
    goals alone it may touch (None: an operator or the scheduler sees all),
    and the request's Idempotency-Key."""

    name: str
    owner: str | None = None
    idempotency_key: str | None = None


def run(caller: Caller, goal_id: str | uuid.UUID, command: Any) -> Outcome:
    """One command on a goal this caller may see (GoalNotFound otherwise), in
    one transaction with what it causes."""
    try:
        with transaction.atomic(savepoint=False):
            try:
                outcome = store.record(goal_id, command, actor=caller.name,
                                       owner=caller.owner,
                                       idempotency_key=caller.idempotency_key)
            except DomainError as error:
                refused = error  # nothing was written: leave the block cleanly
            else:
                follow_up(outcome)
                return outcome
        raise refused
    except IntegrityError as exc:
        raise store.conflict(goal_id) from exc


def start(caller: Caller, command: StartGoal | RunGoal) -> Outcome:
    """Start a goal (or find the active one), in one transaction with what it causes."""
    with transaction.atomic(savepoint=False):
        try:
            outcome = store.start(command, actor=caller.name,
                                  idempotency_key=caller.idempotency_key)
        except DomainError as error:
            refused = error
        else:
            follow_up(outcome)
            return outcome
    raise refused


def follow_up(outcome: Outcome) -> None:
    """What a command causes beyond its events, written in its transaction
    right after them, so that each exists exactly when the committed events
    say so, whichever shell ran the command. One line per kind of row; a new
    consequence is a new line here. A step that raises rolls the command back."""
    if not outcome.events:
        return
    # django-q2 schedule rows: the goal's watchdog and its one-off wakes.
    followup.follow_schedules(outcome)
    # The dispatch outbox: a granted push wake's row, sent after the commit.
    followup.record_dispatches(outcome)
    # A flip of the goal's standing: its notifications, sent after the commit.
    followup.record_flip(outcome)


def state_of(caller: Caller, goal_id: str | uuid.UUID) -> GoalState:
    """A goal's state, if this caller may see it (GoalNotFound otherwise)."""
    state = store.load(goal_id)
    if not state.seen_by(caller.owner):
        raise GoalNotFound(f"no goal {goal_id}")
    return state
