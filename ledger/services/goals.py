"""An agent's use cases on its goal: run (start or resume), take the lease,
heartbeat, release, checkpoint, finish, and the commands that need nothing
but the store (watchdog, receipts, approvals, jobs, the workspace binding).

``Caller`` is who asks: an agent sees only its own goals (``owner``), checked
by the store on the row it locks, so a use case costs no separate read.
"""

import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from ledger import clock, dispatchers, store
from ledger.domain import (
    AcquireLease,
    DomainError,
    GoalState,
    Heartbeat,
    RunGoal,
    StartGoal,
)
from ledger.domain.smartwake import preflight
from ledger.services.answers import holds, lease_answer
from ledger.services.tokens import digest


@dataclass(frozen=True, slots=True)
class Caller:
    """Who runs a use case: the actor recorded on its events, the agent whose
    goals alone it may touch (None: an operator or the scheduler sees all),
    and the request's Idempotency-Key."""

    name: str
    owner: str | None = None
    idempotency_key: str | None = None


def execute(caller: Caller, goal_id: str | uuid.UUID, command: Any) -> store.Outcome:
    """One command on a goal this caller may see (GoalNotFound otherwise)."""
    return store.execute(goal_id, command, actor=caller.name, owner=caller.owner,
                         idempotency_key=caller.idempotency_key)


def state_of(caller: Caller, goal_id: str | uuid.UUID) -> GoalState:
    """A goal's state, if this caller may see it (GoalNotFound otherwise)."""
    state = store.load(goal_id)
    if caller.owner is not None and state.agent != caller.owner:
        raise store.GoalNotFound(f"no goal {goal_id}")
    return state


@dataclass(frozen=True)
class RunAnswer:
    """run_goal: the goal, whether this call created it, and the lease answer."""

    state: GoalState
    created: bool
    lease: dict[str, Any]
    preflight: dict[str, Any]


def run_goal(caller: Caller, token: str, *, workspace: str, goal_key: str, objective: str,
             done_criteria: tuple[str, ...] = (), next_actions: tuple[str, ...] = (),
             policy: dict[str, Any] | None = None, session: dict[str, Any] | None = None,
             timeout_seconds: int | None = None,
             estimated_duration_seconds: int | None = None) -> RunAnswer:
    """Start the goal (or find the active one) and try to take its lease with
    ``token``, in one transaction."""
    digest_ = digest(token)
    command = RunGoal(StartGoal(
        goal_id=str(uuid.uuid4()), workspace=workspace, goal_key=goal_key,
        objective=objective, done_criteria=done_criteria, next_actions=next_actions,
        agent=caller.name,
        # The stale grace is the server's, not the agent's to choose.
        policy={**(policy or {}), "stale_grace_seconds": settings.WAKELEDGER_STALE_GRACE_SECONDS},
        dispatchers=dispatchers.names(),
        cadence_unit_seconds=settings.WAKELEDGER_CADENCE_UNIT_SECONDS,
        caps=settings.WAKELEDGER_CAPS,
        session=dict(session or {}), timeout_seconds=timeout_seconds,
        estimated_duration_seconds=estimated_duration_seconds,
    ), holder=caller.name, token_sha256=digest_)
    outcome = store.start(command, actor=caller.name, idempotency_key=caller.idempotency_key)
    state = outcome.state
    return RunAnswer(state, outcome.created,
                     lease_answer(state, holds(state, digest_), token, outcome.events),
                     preflight(state, clock.now()))


def acquire(caller: Caller, goal_id: str | uuid.UUID, token: str) -> dict[str, Any]:
    """Take the lease with ``token`` (or take over a stale one); a live lease
    held by another is a refusal in the answer, not an error."""
    digest_ = digest(token)
    try:
        outcome = execute(caller, goal_id, AcquireLease(caller.name, digest_))
    except DomainError as refused:
        if refused.code != "lease_held":
            raise
        return lease_answer(state_of(caller, goal_id), False, token)
    return lease_answer(outcome.state, holds(outcome.state, digest_), token, outcome.events)


def heartbeat(caller: Caller, goal_id: str | uuid.UUID, proof: Any) -> dict[str, Any]:
    state = execute(caller, goal_id, Heartbeat(proof)).state
    return {"generation": state.lease["generation"], "expires_at": state.lease["expires_at"],
            "preflight": preflight(state, clock.now())}

