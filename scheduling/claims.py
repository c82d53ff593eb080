"""One code path for every wake claim: the host-fired POST /claim and the
internal django-q2 task both come here, and the claim is decided in one
transaction by the domain."""

import hashlib
import secrets
import uuid
from dataclasses import dataclass, field
from typing import Any

from ledger import clock
from ledger.domain import GoalState
from ledger.domain.smartwake import resume_packet
from ledger.domain.wakes import ClaimWake, claim_outcome, watchdog_live
from scheduling import watchdogs


@dataclass
class Claim:
    outcome: str
    report: dict[str, Any]
    state: GoalState
    packet: dict[str, Any] | None = None
    lease: dict[str, Any] | None = None  # raw token: returned or dispatched, never stored
    retry_after_seconds: int | None = None
    events: list[Any] = field(default_factory=list)


def claim(goal_id: str | uuid.UUID, *, source: str, occurrence_id: str, reason: str = "",
          holder: str = "", actor: str, idempotency_key: str | None = None,
          token: str | None = None) -> Claim:
    raw = token or f"wll_{secrets.token_urlsafe(32)}"
    command = ClaimWake(occurrence_id, source, holder,
                        hashlib.sha256(raw.encode()).hexdigest(), reason)
    outcome = watchdogs.execute(goal_id, command, actor=actor, idempotency_key=idempotency_key)
    state = outcome.state
    wake = next((e for e in outcome.events if e.kind == "wake.claimed"), None)
    # Nothing recorded (already_claimed, receipt_required): the same pure rule
    # says why.
    answer = dict(wake.data) if wake else claim_outcome(state, command, clock.now())
    granted = answer["outcome"] == "recurring_acquired"
    report = {
        "task_id": state.goal_id,
        "status": state.status,
        "progress_pct": state.progress_pct,
        "current_step": state.current_step,
        "resumed_from_checkpoint": state.last_checkpoint_seq if granted else None,
        "next_wake_scheduled": watchdog_live(state),
        "next_wake_at": state.watchdog.get("next_due_at") if watchdog_live(state) else None,
        "notes": answer.get("notes", ""),
    }
    result = Claim(answer["outcome"], report, state, events=outcome.events,
                   retry_after_seconds=answer.get("retry_after_seconds"))
    if granted:
        result.packet = resume_packet(state)
        result.lease = {"token": raw, "generation": state.lease["generation"],
                        "holder": state.lease["holder"], "expires_at": state.lease["expires_at"]}
    return result
