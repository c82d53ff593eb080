"""One code path for every wake: the host-fired POST /claim, the internal
django-q2 task and an operator's "wake now" all come here. The claim is
decided by the domain in one store transaction; this shell only makes the
lease token and shapes the answer (the wake-cycle report, the resume packet).
"""

import base64
import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from ledger import clock, store
from ledger.dispatchers import lease_dispatchers
from ledger.domain import GoalState
from ledger.domain.claims import ClaimWake, WakeNow, claim_outcome, occurrence_of
from ledger.domain.smartwake import resume_packet
from ledger.domain.timing import next_wake_at


@dataclass
class Claim:
    outcome: str
    report: dict[str, Any]
    state: GoalState
    packet: dict[str, Any] | None = None
    lease: dict[str, Any] | None = None  # raw token: returned or dispatched, never stored
    retry_after_seconds: int | None = None
    occurrence_id: str = ""
    events: list[Any] = field(default_factory=list)


def dispatch_token(goal_id: str, occurrence_id: str) -> str:
    """The lease token a push dispatch hands over, derived (HMAC under
    SECRET_KEY) rather than random so the outbox row needs to hold no secret:
    the sender derives it again from the goal and the occurrence."""
    material = f"wakeledger.dispatch-lease\n{goal_id}\n{occurrence_id}".encode()
    digest = hmac.new(settings.SECRET_KEY.encode(), material, hashlib.sha256).digest()
    return "wll_" + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def claim(goal_id: str | uuid.UUID, *, source: str, occurrence_id: str = "", reason: str = "",
          holder: str = "", actor: str, idempotency_key: str | None = None,
          token: str | None = None, kind: str = "recurring", intended_at: str = "",
          push: bool = False) -> Claim:
    """One wake's claim, with one locked read of the goal: whether it is
    pushed (its dispatcher hands over the lease) is decided by the domain on
    the locked state. An internal wake's lease token is the derived dispatch
    token (only a push hands it out, and the outbox derives it again); a
    host's claimant gets a fresh random one. ``push`` forces a push whatever
    the goal's dispatcher (what the tests use to stand for one)."""
    goal_id = store.canonical_id(goal_id)
    if source != "host":
        token = dispatch_token(goal_id, occurrence_id)
    raw = token or f"wll_{secrets.token_urlsafe(32)}"
    command = ClaimWake(occurrence_id, source, holder, digest(raw), reason, kind=kind,
                        intended_at=intended_at, push=push,
                        push_dispatchers=lease_dispatchers())
    outcome = store.execute(goal_id, command, actor=actor, idempotency_key=idempotency_key)
    return _answer(outcome, command, raw)


def wake_now(goal_id: str | uuid.UUID, *, operator: str, reason: str,
             idempotency_key: str | None = None) -> Claim:
    """An operator's "wake now": ends a pause early and resumes the goal the
    way its own wakes do (ready for its agent, or pushed to a dispatcher that
    hands over the lease)."""
    goal_id = store.canonical_id(goal_id)
    occurrence = f"operator:{uuid.uuid4()}"
    token = dispatch_token(goal_id, occurrence)
    command = WakeNow(operator, reason, occurrence, digest(token),
                      push_dispatchers=lease_dispatchers())
    outcome = store.execute(goal_id, command, actor=operator, idempotency_key=idempotency_key)
    wake = ClaimWake(occurrence, "operator", "", command.token_sha256, kind="operator",
                     push_dispatchers=command.push_dispatchers, note=reason, operator=operator)
    return _answer(outcome, wake, token)


def _answer(outcome: store.Outcome, command: ClaimWake, raw: str) -> Claim:
    state = outcome.state
    wake = next((e for e in outcome.events if e.kind == "wake.claimed"), None)
    # Nothing recorded (already_claimed, receipt_required): the same pure rule
    # says why, on the state the claim was decided on.
    answer = dict(wake.data) if wake else claim_outcome(outcome.before, command, clock.now())
    occurrence = (wake.data["occurrence_id"] if wake
                  else occurrence_of(outcome.before, command, clock.now()))
    granted = answer["outcome"] == "recurring_acquired"
    upcoming = next_wake_at(state)
    report = {
        "task_id": state.goal_id,
        "status": state.status,
        "progress_pct": state.progress_pct,
        "current_step": state.current_step,
        "resumed_from_checkpoint": state.last_checkpoint_seq if granted else None,
        "next_wake_scheduled": bool(upcoming),
        # When the next wake will really fire: the slot the scheduler row was
        # written for (django-q2 looks every 30 s, so up to 30 s after it).
        "next_wake_at": upcoming or None,
        "notes": answer.get("notes", ""),
    }
    result = Claim(answer["outcome"], report, state, events=outcome.events,
                   retry_after_seconds=answer.get("retry_after_seconds"),
                   occurrence_id=occurrence)
    if granted:
        result.packet = resume_packet(state)
        result.lease = {"token": raw, "generation": state.lease["generation"],
                        "holder": state.lease["holder"], "expires_at": state.lease["expires_at"]}
    return result
