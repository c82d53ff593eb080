"""Every wake, through one function each: a host-fired claim, a scheduled
wake (django-q2), an operator's "wake now", and what the outbox sends for a
granted one. Each claim is decided by the domain in one store transaction on
one locked read of the goal — push or pull included (the command carries the
dispatchers that hand over a lease) — and answered here.
"""

import uuid
from dataclasses import dataclass, field
from typing import Any

from ledger.domain import DomainError, GoalState
from ledger.domain.claims import ClaimWake, WakeNow
from ledger.domain.dispatches import RecordDispatch, dispatches, lapsed_unsent, superseded
from ledger.domain.leases import UNREAD, Unheard, UnheardNeeded
from ledger.domain.smartwake import resume_packet
from ledger.domain.watchdogs import HOST
from ledger.eventstore import clock, store
from ledger.project.dispatchers import lease_dispatchers
from ledger.services import alerts, ids
from ledger.services.answers import LeaseGrant, WakeReport
from ledger.services.caller import Caller, run
from ledger.services.followup import GRANTED, PULLABLE
from ledger.services.tokens import digest, dispatch_lease, random_lease


@dataclass
class Claim:
    """What one wake's claim decided, as its claimant is answered."""

    outcome: str
    report: WakeReport
    state: GoalState
    packet: dict[str, Any] | None = None
    lease: LeaseGrant | None = None  # raw token: returned or dispatched, never stored
    retry_after_seconds: int | None = None
    occurrence_id: str = ""
    events: list[Any] = field(default_factory=list)

    @property
    def resumes(self) -> bool:
        """The wake goes on: a lease granted, or a ready wake to pull."""
        return self.outcome in (GRANTED, PULLABLE)

    @property
    def dispatched(self) -> bool:
        """A dispatcher carries this goal's wakes (so the claim may have left
        an outbox row to send): asked of the state the claim decided."""
        return dispatches(self.state)

    def as_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "occurrence_id": self.occurrence_id,
                "report": self.report.as_dict(),
                "retry_after_seconds": self.retry_after_seconds,
                "resume_packet": self.packet,
                "lease": self.lease.as_dict() if self.lease else None}


def claim(goal_id: str | uuid.UUID, *, source: str, occurrence_id: str = "", reason: str = "",
          holder: str = "", actor: str, idempotency_key: str | None = None,
          token: str | None = None, kind: str = "recurring", intended_at: str = "",
          push: bool = False, owner: str | None = None,
          unheard: Unheard | str = None) -> Claim:
    """One wake's claim. An internal wake's lease token is the derived
    dispatch token (only a push hands it out, and the outbox derives it
    again); a host's claimant gets the token it brings or a fresh random one.
    ``push`` forces a push whatever the goal's dispatcher (what the tests use
    to stand for one); ``owner`` limits the claim to that agent's goals;
    ``unheard``: the server's recent silence (``leases.unheard_grace``)."""
    goal_id = store.canonical_id(goal_id)
    if source != "host":
        token = dispatch_lease(goal_id, occurrence_id)
    raw = token or random_lease()
    command = ClaimWake(occurrence_id, source, holder, digest(raw), reason, kind=kind,
                        intended_at=intended_at, push=push,
                        push_dispatchers=lease_dispatchers(), unheard=unheard)
    outcome = run(Caller(actor, owner, idempotency_key), goal_id, command)
    return _answer(outcome, raw)


def host_claim(caller: Caller, goal_id: str | uuid.UUID, *, occurrence_id: str, reason: str,
               token: str) -> Claim:
    """POST /claim: a host-fired task claims its wake. Without an occurrence
    id the domain names the claim after the watchdog's slot it belongs to,
    so two fires for one slot are one claim."""
    occurrence = f"host:{occurrence_id}" if occurrence_id else ""
    return claim(goal_id, source=HOST, occurrence_id=occurrence, reason=reason,
                 holder=caller.name, actor=caller.name, idempotency_key=caller.idempotency_key,
                 token=token, owner=caller.owner)


def fire(goal_id: str, intended_at: str | None = None, kind: str = "recurring") -> Claim:
    """A scheduled wake fired: the recurring watchdog's slot, or a one-off
    wake (``kind``). Its occurrence id is the schedule's intended run time,
    so the same occurrence fired twice (two clusters, a retry) is one claim.
    A claim that meets a lease judges it with the window the sweeper's beats
    say no sweep completed in (``alerts.unheard_window``): a late fire after
    an outage gives the holder the reconnect grace the sweeper gives it. The
    window is read only then (``leases.UnheardNeeded``: nothing was written),
    and the claim asked again."""
    intended = intended_at or clock.now().isoformat()
    occurrence = (f"internal:{goal_id}@{intended}" if kind == "recurring"
                  else f"internal:{goal_id}@{kind}:{intended}")
    try:
        return claim(goal_id, source="internal", occurrence_id=occurrence, actor="scheduler",
                     kind=kind, intended_at=intended, unheard=UNREAD)
    except UnheardNeeded:
        return claim(goal_id, source="internal", occurrence_id=occurrence, actor="scheduler",
                     kind=kind, intended_at=intended,
                     unheard=alerts.unheard_window(clock.now()))


def wake_now(goal_id: str | uuid.UUID, *, operator: str, reason: str,
             idempotency_key: str | None = None) -> Claim:
    """An operator's "wake now": ends a pause early and resumes the goal the
    way its own wakes do (ready for its agent, or pushed to a dispatcher that
    hands over the lease)."""
    goal_id = store.canonical_id(goal_id)
    occurrence = f"operator:{ids.new_id()}"
    token = dispatch_lease(goal_id, occurrence)
    command = WakeNow(operator, reason, occurrence, digest(token),
                      push_dispatchers=lease_dispatchers())
    outcome = run(Caller(operator, idempotency_key=idempotency_key), goal_id, command)
    return _answer(outcome, token)


def _answer(outcome: store.Outcome, raw: str) -> Claim:
    """The claimant's answer, read from the verdict the domain decided in the
    claim's transaction (its occurrence and outcome, recorded or not)."""
    state, verdict = outcome.state, outcome.claim
    assert verdict is not None, "a claim's outcome carries its verdict"
    answer = verdict.answer
    granted = verdict.outcome == GRANTED
    result = Claim(verdict.outcome,
                   WakeReport.of(state, resumed=granted, notes=answer.get("notes", "")),
                   state, events=outcome.events,
                   retry_after_seconds=answer.get("retry_after_seconds"),
                   occurrence_id=verdict.occurrence_id)
    if granted:
        result.packet = resume_packet(state)
        result.lease = LeaseGrant.of(state, raw)
    return result


@dataclass(frozen=True)
class Delivery:
    """What the outbox sends for one granted wake: its lease (None for a
    ready wake's notification: the agent pulls the lease itself), the
    resume packet and the wake-cycle report."""

    goal_id: str
    occurrence_id: str
    session_key: str
    packet: dict[str, Any]
    report: WakeReport
    lease: LeaseGrant | None


def delivery(goal_id: str, occurrence_id: str, generation: int,
             state: GoalState | None = None) -> Delivery | None:
    """The dispatch of a recorded wake, or None when sending it now would only
    be refused (``dispatches.superseded``). ``state``: the goal as the claim
    that granted the wake left it (a push wake then reads its goal once); the
    outbox's later passes (a crashed sender's rows) read it here."""
    state = state if state is not None else store.load(goal_id)
    if superseded(state, generation):
        return None
    lease = (LeaseGrant.of(state, dispatch_lease(state.goal_id, occurrence_id))
             if generation else None)
    return Delivery(state.goal_id, occurrence_id, state.session_key, resume_packet(state),
                    WakeReport.of(state, resumed=True, notes="dispatched"), lease)


def lapsed(goal_id: str, generation: int) -> bool:
    """Whether an unsent dispatch's lease expired before any sender took it
    (``dispatches.lapsed_unsent``): the outbox then records it as a dispatch
    that started nothing."""
    try:
        state = store.load(goal_id)
    except store.GoalNotFound:
        return False
    return lapsed_unsent(state, generation, clock.now())


def record_dispatch(goal_id: str, occurrence_id: str, dispatcher: str, *, ok: bool, detail: str,
                    uncertain: bool, generation: int) -> str:
    """What a dispatcher did with a wake, recorded on its goal (the domain
    decides what follows: a dispatch that started nothing frees its lease).
    Returns "" when recorded, else why not (the goal ended meanwhile)."""
    command = RecordDispatch(occurrence_id, dispatcher, ok, detail, uncertain=uncertain,
                             generation=generation)
    try:
        run(Caller("scheduler"), goal_id, command)
    except DomainError as error:
        return error.detail
    return ""
