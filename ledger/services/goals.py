"""An agent's use cases on its goal's lease: run (start or resume), take
the lease, heartbeat. (Checkpoints, release and finish are ``work``; the
watchdog is ``watchdogs``.) ``Caller`` and ``state_of`` are ``caller``'s,
imported here where the shells have always found them."""

import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from ledger.domain import (
    AcquireLease,
    DomainError,
    GoalState,
    Heartbeat,
    RunGoal,
    StartGoal,
)
from ledger.domain.events import iso
from ledger.domain.smartwake import preflight
from ledger.eventstore import clock
from ledger.project import dispatchers
from ledger.services import ids
from ledger.services.answers import holds, lease_answer
from ledger.services.bodies import goal_body
from ledger.services.caller import Caller, run, start, state_of

__all__ = ["Caller", "RunAnswer", "acquire", "heartbeat", "run_goal", "state_of"]
from ledger.services.tokens import digest


@dataclass(frozen=True)
class RunAnswer:
    """run_goal: the goal, whether this call created it, and the lease answer."""

    state: GoalState
    created: bool
    lease: dict[str, Any]
    preflight: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"goal": goal_body(self.state), "created": self.created, **self.lease,
                "preflight": self.preflight}


def run_goal(caller: Caller, token: str, *, workspace: str, goal_key: str, objective: str,
             done_criteria: tuple[str, ...] = (), next_actions: tuple[str, ...] = (),
             policy: dict[str, Any] | None = None, session: dict[str, Any] | None = None,
             timeout_seconds: int | None = None,
             estimated_duration_seconds: int | None = None) -> RunAnswer:
    """Start the goal (or find the active one) and try to take its lease with
    ``token``, in one transaction."""
    digest_ = digest(token)
    command = RunGoal(StartGoal(
        goal_id=ids.new_id(), workspace=workspace, goal_key=goal_key,
        objective=objective, done_criteria=done_criteria, next_actions=next_actions,
        agent=caller.name,
        # The stale grace and the long pause are the server's, not the agent's to choose.
        policy={**(policy or {}), "stale_grace_seconds": settings.WAKELEDGER_STALE_GRACE_SECONDS,
                "long_pause_minutes": settings.WAKELEDGER_LONG_PAUSE_MINUTES},
        dispatchers=dispatchers.names(),
        cadence_unit_seconds=settings.WAKELEDGER_CADENCE_UNIT_SECONDS,
        caps=settings.WAKELEDGER_CAPS,
        session=dict(session or {}), timeout_seconds=timeout_seconds,
        estimated_duration_seconds=estimated_duration_seconds,
    ), holder=caller.name, token_sha256=digest_)
    outcome = start(caller, command)
    state = outcome.state
    return RunAnswer(state, outcome.created,
                     lease_answer(state, holds(state, digest_), token, outcome.events),
                     preflight(state, clock.now()))


def acquire(caller: Caller, goal_id: str | uuid.UUID, token: str) -> dict[str, Any]:
    """Take the lease with ``token`` (or take over a stale one); a live lease
    held by another is a refusal in the answer, not an error."""
    digest_ = digest(token)
    try:
        outcome = run(caller, goal_id, AcquireLease(caller.name, digest_))
    except DomainError as refused:
        if refused.code != "lease_held":
            raise
        return lease_answer(state_of(caller, goal_id), False, token)
    return lease_answer(outcome.state, holds(outcome.state, digest_), token, outcome.events)


def heartbeat(caller: Caller, goal_id: str | uuid.UUID, proof: Any) -> dict[str, Any]:
    state = run(caller, goal_id, Heartbeat(proof)).state
    lease = state.lease
    assert lease is not None, "a heartbeat renews the lease it presented"
    return {"generation": lease.generation, "expires_at": iso(lease.expires_at),
            "preflight": preflight(state, clock.now())}

