"""An operator's acts on a goal — stop, recover, approve or reject a gate,
wake now — the same use case from the API, the admin and ``manage.py
ledger``; and the probe that tells a shell, before it offers an act, whether
the domain would accept it."""

import uuid
from dataclasses import dataclass
from typing import Any

from ledger.domain import DomainError, GoalState, decide
from ledger.domain.claims import WakeNow
from ledger.domain.runs import Recover, ResolveApproval, Stop
from ledger.eventstore import clock
from ledger.services import wakes
from ledger.services.bodies import GoalAnswer
from ledger.services.caller import Caller, run

ACTS = ("stop", "recover", "wake", "approve", "reject")


def command_for(act: str, operator: str, reason: str, gate: str = "") -> Any:
    """The domain command behind an operator act (a wake's, as a probe: its
    real command carries the occurrence and token ``wakes.wake_now`` makes)."""
    return {
        "stop": lambda: Stop(operator, reason),
        "recover": lambda: Recover(operator, reason),
        "wake": lambda: WakeNow(operator, reason, "operator:probe", "0" * 64),
        "approve": lambda: ResolveApproval(gate, "approve", operator, reason),
        "reject": lambda: ResolveApproval(gate, "reject", operator, reason),
    }[act]()


@dataclass(frozen=True)
class Acted:
    """What an act left: the goal's state, and for a wake its claim."""

    state: GoalState
    claim: wakes.Claim | None = None

    def as_dict(self) -> dict[str, Any]:
        """A wake answers its claim; the other acts answer the goal."""
        return self.claim.as_dict() if self.claim else GoalAnswer(self.state).as_dict()


def act(act: str, goal_id: str | uuid.UUID, *, operator: str, reason: str, gate: str = "",
        idempotency_key: str | None = None) -> Acted:
    if act == "wake":
        claim = wakes.wake_now(goal_id, operator=operator, reason=reason,
                               idempotency_key=idempotency_key)
        return Acted(claim.state, claim)
    caller = Caller(operator, idempotency_key=idempotency_key)
    return Acted(run(caller, goal_id, command_for(act, operator, reason, gate)).state)


def refusal_of(state: GoalState, command: Any) -> DomainError | None:
    """What the domain would say to the command now: None if it would accept
    it. ``decide`` is pure, so asking writes nothing, and a shell offers an
    act exactly when the rules (wherever they move) allow it."""
    try:
        decide(state, command, clock.now())
    except DomainError as error:
        return error
    return None


def refusal(state: GoalState, act: str, operator: str, gate: str = "") -> DomainError | None:
    """What the domain would say to this act now (None: it would accept it)."""
    return refusal_of(state, command_for(act, operator, "probe", gate))


def refusals(state: GoalState, operator: str) -> dict[str, DomainError | None]:
    """Recover, wake and stop, each with the domain's refusal or None (offered)."""
    return {name: refusal_of(state, command_for(name, operator, "probe"))
            for name in ("recover", "wake", "stop")}
