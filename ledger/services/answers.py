"""The answers a use case returns, each built in one place.

A granted lease (``LeaseGrant``), the wake-cycle report a wake's claimant and
its dispatcher both receive (``WakeReport``), and the answer to "may I have
the lease?" (``lease_answer``: the API's run_goal and acquire, the MCP
server's through them). Raw tokens appear here only on their way out to the
caller: they are never stored.
"""

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from ledger.domain import GoalState, lease_refusal, liveness
from ledger.domain.events import iso
from ledger.domain.kinds import ContinuationCharged, LeaseGranted
from ledger.domain.parts import iso_text
from ledger.domain.smartwake import resume_packet
from ledger.domain.timing import next_wake_at
from ledger.eventstore import clock


@dataclass(frozen=True, slots=True)
class LeaseGrant:
    """A lease handed to its holder: the raw token, once, and what fences it."""

    token: str
    generation: int
    holder: str
    expires_at: str

    @classmethod
    def of(cls, state: GoalState, token: str) -> "LeaseGrant":
        lease = state.lease
        assert lease is not None, "a granted lease"
        return cls(token, lease.generation, lease.holder, iso(lease.expires_at))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def holds(state: GoalState, token_sha256: str) -> bool:
    """Was the lease granted to this token? (It is the goal's lease now.)"""
    return state.lease is not None and state.lease.token_sha256 == token_sha256


@dataclass(frozen=True, slots=True)
class WakeReport:
    """The wake-cycle report: where the goal stands after a wake."""

    task_id: str
    status: str
    progress_pct: int
    current_step: str
    resumed_from_checkpoint: int | None
    next_wake_scheduled: bool
    # When the next wake will really fire: the slot the scheduler row was
    # written for (django-q2 looks every 30 s, so up to 30 s after it).
    next_wake_at: str | None
    notes: str

    @classmethod
    def of(cls, state: GoalState, *, resumed: bool, notes: str) -> "WakeReport":
        upcoming = next_wake_at(state)
        return cls(state.goal_id, state.status, state.progress_pct, state.current_step,
                   state.last_checkpoint_seq if resumed else None, upcoming is not None,
                   iso_text(upcoming) or None, notes)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def lease_answer(state: GoalState, granted: bool, raw_token: str,
                 events: Iterable[Any] = ()) -> dict[str, Any]:
    """The answer to a lease request: the grant (and, when it resumed a due
    wake, which one and the resume packet), or the domain's refusal.
    ``events``: the command's appended events (``store.StoredEvent``), read
    by their typed payloads."""
    if not granted:
        refusal = lease_refusal(state, clock.now()) or {}
        refusal.pop("why", None)
        return {"acquired": False, "lease": None, "retry_after_seconds": None,
                "next_required_action": None, **refusal}
    events = list(events)
    answer: dict[str, Any] = {"acquired": True, "retry_after_seconds": None,
                              "next_required_action": None,
                              "lease": LeaseGrant.of(state, raw_token).as_dict()}
    pulled = next((e.payload.pulled for e in events
                   if isinstance(e.payload, LeaseGranted) and e.payload.pulled is not None),
                  None)
    if pulled is not None:
        # The lease resumed a due wake: say which, and hand the resume packet.
        charged = any(isinstance(e.payload, ContinuationCharged) for e in events)
        answer["resumed"] = {**pulled, "charged": charged}
        answer["resume_packet"] = resume_packet(state)
    instructions = host_instructions(state)
    if instructions:
        answer["host_instructions"] = instructions
    return answer


def host_instructions(state: GoalState) -> dict[str, Any] | None:
    """For the agent's next contact with a HOST_SILENT goal: its host stopped
    claiming slots, and only the agent can reach the host (the server never
    creates a native task itself)."""
    if liveness.attention(state) != liveness.HOST_SILENT:
        return None
    alert = state.liveness_alert
    return {
        "reason": liveness.HOST_SILENT,
        "why": alert.detail if alert is not None else "",
        "missed_since": iso_text(alert.missed_since) or None if alert is not None else None,
        "next_required_action": "check_the_host_schedule",
        "steps": [
            "If the host's scheduled task for this goal still exists and runs, do nothing: "
            "its next claim ends HOST_SILENT.",
            f"If it is gone, POST /api/v1/goals/{state.goal_id}/watchdog/receipts with status "
            "user_attested_deleted (attested_by), then POST /api/v1/goals/"
            f"{state.goal_id}/watchdog and create the host_schedule it answers.",
        ],
    }
