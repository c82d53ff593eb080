"""Leases (the lease rule): acquire, take over a stale one, renew, release, fence.

A live lease is never stolen. Past its expiry plus the stale grace it may be
taken over with generation + 1, whether or not its holder tracked a blocking
job (a holder that waits on one heartbeats). Every write
that changes work presents the current lease (``fence``).
"""

import hmac
from dataclasses import dataclass
from datetime import datetime, timedelta
from math import ceil
from typing import Any, ClassVar

from ledger.domain import progress, validation
from ledger.domain.codec import Payload, but, event_kind, optional
from ledger.domain.commands import AcquireLease, Heartbeat, LeaseProof, ReleaseLease
from ledger.domain.errors import DomainError, GoalBlocked, LeaseHeld, LeaseLost, LeaseRequired
from ledger.domain.events import Changes, Event, Json, Style, iso
from ledger.domain.parts import Continued, Lease, iso_text
from ledger.domain.state import BLOCKED, LONG_PAUSE, PAUSED, RUNNING, WAITING, GoalState
from ledger.domain.text import clean, known, short
from ledger.domain.timing import pause_left, paused

# A client that met an unreachable server retries within minutes of its
# return: a lease that went stale while the server could not be heard from is
# given this long after that window before it is taken from its holder.
RECONNECT_GRACE = timedelta(minutes=5)

# When the server itself could not be heard from (no sweep completed: the
# scheduler or the database was down), from the last sweep before the silence
# to the first pass after it; found by the shell (None: no recent silence).
Unheard = tuple[datetime, datetime] | None
# A claim's ``unheard`` the shell has not read yet: the decision asks for it
# (UnheardNeeded) only when it meets a lease, which the window alone affects.
UNREAD = "unread"


class UnheardNeeded(DomainError):
    """A claim met a lease, and its shell has not read the window in which the
    server could not hear its clients: the shell reads it and asks again.
    Read only then: most fires meet no lease, and the read is a query of its
    own (docs/performance.md, "Where a claim's time went")."""

    code = "unheard_needed"


def judged_unheard(state: GoalState, unheard: Unheard | str) -> Unheard:
    """The window a claim judges the goal's lease with: none needed when there
    is no lease (no rule reads it then); the shell's, read on demand."""
    if unheard != UNREAD:
        return unheard  # type: ignore[return-value]
    if state.lease is not None:
        raise UnheardNeeded("the lease is judged with the server's recent silence")
    return None


def unheard_grace(stale_at: datetime, unheard: Unheard) -> datetime:
    """When a lease may be expired or taken: its stale point, or — when it went
    stale during a window in which the server itself could not be heard from —
    the end of that window plus RECONNECT_GRACE. A holder must not be judged
    silent (INTERRUPTED_UNKNOWN for a continuation, a charged recovery) for
    calls an outage refused: every path that judges it (the sweeper, a wake's
    claim) asks here."""
    if unheard is None or stale_at <= unheard[0]:
        return stale_at
    return max(stale_at, unheard[1] + RECONNECT_GRACE)


def lease_stale_at(state: GoalState, unheard: Unheard = None) -> datetime | None:
    """When the current lease may be taken over (None: there is no lease),
    the reconnect grace after an unheard window included."""
    if state.lease is None:
        return None
    grace = state.setting("stale_grace_seconds")
    return unheard_grace(state.lease.expires_at + timedelta(seconds=grace), unheard)


def lease_live(state: GoalState, now: datetime) -> bool:
    """Is there a lease, not yet past its expiry? (What a reader means by an
    active lease; the lease's ``active`` flag is the uncertain-attempt rule's "the holder
    has shown a sign of life since the grant", which starts false.)"""
    return state.lease is not None and now < state.lease.expires_at


def lease_refusal(state: GoalState, now: datetime,
                  unheard: Unheard = None) -> dict[str, Any] | None:
    """Why a lease cannot be granted now, or None when it can. Pure: the API
    also uses it to explain a refused acquire. ``unheard``: a recent window in
    which the server could not be heard from (its holder keeps the lease
    until RECONNECT_GRACE after it)."""
    if state.terminal:
        return {"retry_after_seconds": None, "next_required_action": "start_a_new_goal",
                "why": f"the goal is {state.status}"}
    if state.status == BLOCKED:
        return {"retry_after_seconds": None, "next_required_action": "operator_recover",
                "why": f"the goal is blocked ({state.reason}); an operator must recover it"}
    wait = pause_left(state, now)
    if wait:
        return {"retry_after_seconds": wait, "next_required_action": "wait_for_reset",
                "why": f"rate limited: paused until {iso_text(state.paused_until)}"}
    stale_at = lease_stale_at(state, unheard)
    if stale_at is None or state.lease is None:
        return None
    if now >= stale_at:
        # Stale, whatever it tracked: a holder that waits on a CI run
        # heartbeats while it waits, and a dead one must never lock the goal
        # behind its job (the resume packet names the job to inspect).
        return None
    # A live lease is never stolen; past its expiry only the grace remains.
    lease = state.lease
    in_grace = now >= lease.expires_at
    return {
        "retry_after_seconds": max(1, ceil((stale_at - now).total_seconds())),
        "next_required_action": "retry_after_stale_grace" if in_grace else "wait_for_holder",
        "why": (f"the lease is held by {lease.holder} (generation "
                f"{lease.generation}) until {iso(lease.expires_at)}"
                + (", now in its stale grace" if in_grace else "")),
        "holder": lease.holder,
        "expires_at": iso(lease.expires_at),
    }


def acquire(state: GoalState, cmd: AcquireLease, now: datetime) -> list[Event]:
    refusal = lease_refusal(state, now)
    if refusal is not None:
        error = GoalBlocked if state.status == BLOCKED else LeaseHeld
        raise error(refusal.pop("why"), **refusal)
    return acquire_events(state, cmd.holder, cmd.token_sha256, now)


def acquire_events(state: GoalState, holder: str, token_sha256: str, now: datetime,
                   *, via: str = "agent") -> list[Event]:
    """A new lease for ``holder``: acquired, or taken over from a stale one.
    The caller has checked that the lease may be granted now."""
    holder = validation.text(holder, "holder", limit=validation.MAX_KEY, required=True)
    if state.agent and holder != state.agent:
        raise DomainError(f"only {state.agent}'s workers may hold this goal's lease",
                          code="forbidden")
    digest = validation.sha256(token_sha256, "token_sha256")
    seconds = state.setting("lease_seconds")
    grant = dict(
        holder=holder,
        generation=state.lease_generation + 1,
        token_sha256=digest,
        lease_seconds=seconds,
        expires_at=iso(now + timedelta(seconds=seconds)),
        # "wake": granted to an automatic continuation (the uncertain-attempt rule watches it).
        via=via,
    )
    previous = state.lease
    if previous is None:
        return [Event(LeaseAcquired(**grant), now)]
    return [Event(LeaseTakenOver(**grant, previous_holder=previous.holder,
                                 previous_generation=previous.generation,
                                 previous_expires_at=iso(previous.expires_at)), now)]


_LEASE_ENDS = {"released": "was released", "expired": "expired",
               "finished": "ended with the finish"}


def no_lease_why(state: GoalState) -> str:
    """What is true when a fenced call finds no lease: how the last one ended
    and what the goal waits for, so "acquire one" is said only when it would
    be granted. (After a rate limit the run report itself released the lease.)"""
    if paused(state):
        return (f"the goal holds no lease: the rate-limit run report released it, and the "
                f"goal is paused until {iso_text(state.paused_until)}; take a new lease after then "
                "(or let its reset wake resume it)")
    ended = _LEASE_ENDS.get(state.lease_end)
    why = f"the goal holds no lease (the last one {ended})" if ended else \
        "the goal holds no lease"
    if state.terminal:
        return f"{why}; the goal is {state.status}"
    if state.status == BLOCKED:
        return f"{why}; the goal is blocked ({state.reason}) until an operator acts"
    return f"{why}; acquire one"


def fence(state: GoalState, proof: LeaseProof | None) -> Lease:
    """The lease rule: every write that changes work presents the current lease."""
    if proof is None:
        raise LeaseRequired("this call must carry lease: {token, generation}", field="lease")
    lease = state.lease
    if lease is None:
        raise LeaseLost(no_lease_why(state), field="lease",
                        current_generation=state.lease_generation,
                        paused_until=iso_text(state.paused_until) or None)
    if proof.generation != lease.generation:
        raise LeaseLost(
            f"lease generation {proof.generation} is stale; the current one is "
            f"{lease.generation}", field="lease.generation",
            current_generation=lease.generation)
    if not hmac.compare_digest(str(proof.token_sha256), lease.token_sha256):
        raise LeaseLost("the lease token does not match the current lease",
                        field="lease.token", current_generation=lease.generation)
    return lease


def heartbeat(state: GoalState, cmd: Heartbeat, now: datetime) -> list[Event]:
    lease = fence(state, cmd.proof)
    expires = now + timedelta(seconds=lease.lease_seconds)
    return [Event(LeaseRenewed(generation=lease.generation, expires_at=iso(expires)), now)]


def renewing(state: GoalState, command: object, events: list[Event],
             now: datetime) -> list[Event]:
    """Every fenced call is liveness evidence (docs/design.md, "Wakes and claims"): a
    checkpoint, a run report, a job or watchdog call by the holder renews its
    lease as a heartbeat does (same generation, expiry now + lease_seconds).
    The renewal rides on the call's first event (``lease_expires_at``), so the
    history says it and no second event is written. A call that ends or
    changes the lease renews nothing (its kind says so: ``CHANGES_LEASE``, a
    release, a pause or an ending took it away); a heartbeat is its own renewal."""
    proof = getattr(command, "proof", None)
    if proof is None or not events or state.lease is None or isinstance(command, Heartbeat):
        return events
    for event in events:  # a loop, not any(): its generator cost more than the test
        if event.payload.CHANGES_LEASE:
            return events
    first = events[0]
    expires = iso(now + timedelta(seconds=state.lease.lease_seconds))
    return [Event(but(first.payload, lease_expires_at=expires), first.at), *events[1:]]


def renewed_by(state: GoalState, changes: Changes, expires_at: str, at: datetime) -> Changes:
    """Fold a renewal carried by a fenced call's event into its changes."""
    lease = changes.get("lease", state.lease)
    if lease is None:
        return changes
    return {**changes, "lease": lease.but(expires_at=datetime.fromisoformat(expires_at),
                                          last_heartbeat_at=at, active=True)}


def release(state: GoalState, cmd: ReleaseLease, now: datetime) -> list[Event]:
    lease = fence(state, cmd.proof)
    return [Event(LeaseReleased(generation=lease.generation), now)]


# ---------------------------------------------------------------- the lease kinds


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseGranted(Payload):
    """What both kinds that grant a lease record (not a kind of its own)."""

    CHANGES_LEASE = True
    STYLE = Style("lease")

    holder: str
    generation: int
    token_sha256: str
    lease_seconds: int
    expires_at: str
    # agent | wake (an automatic continuation, the uncertain-attempt rule watches it) | pull.
    via: str
    # A lease call that resumed a due wake (the continuation budget): which one.
    pulled: Json | None = optional()

    def fold(self, state: GoalState, at: datetime) -> Changes:
        # A lease that ends a rate-limit pause (or pulls a reset's ready wake) is
        # that reset's one continuation, whoever took it (its via): a second one
        # stands down against it (ledger.domain.continuations).
        reset = state.paused_until or (state.ready.reset if state.ready is not None else None)
        continued = ({"continued": Continued(reset=reset, by=self.via, at=at,
                                             generation=self.generation)} if reset else {})
        return {
            **continued,
            "status": RUNNING,
            "lease": Lease(
                holder=self.holder,
                generation=self.generation,
                token_sha256=self.token_sha256,
                lease_seconds=self.lease_seconds,
                acquired_at=at,
                expires_at=datetime.fromisoformat(self.expires_at),
                last_heartbeat_at=at,
                via=self.via,
                active=False,
            ),
            "lease_generation": self.generation,
            "lease_end": "",
            # Whoever takes the lease resumes the goal: a due wake is pulled, and
            # a pause (past its reset) and a requested wake are over.
            "ready": None,
            "paused_until": None,
            # A pause's reason ends with it; no other status is leased over.
            **({"reason": ""} if state.status == PAUSED else {}),
            "reset_wake": None,
            "requested_wake": None,
            # A grant is activity, not progress: counted; only the first a wake
            # makes since the last progress starts the clock afresh
            # (ledger.domain.progress). A takeover ends an empty turn too.
            **progress.lease_granted(state, at, self.via),
            # A pause listed for a person ends with the pause.
            **({"liveness_alert": None} if state.alert_reason == LONG_PAUSE else {}),
        }

    def line(self) -> str:
        text = (f"gen {known(self.generation)} to {clean(known(self.holder))} "
                f"until {short(self.expires_at)}")
        return text + (" (automatic continuation)" if self.via == "wake" else "")


@event_kind("lease.acquired")
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseAcquired(LeaseGranted):
    pass


@event_kind("lease.taken_over")
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseTakenOver(LeaseGranted):
    previous_holder: str
    previous_generation: int
    previous_expires_at: str

    def line(self) -> str:
        return LeaseGranted.line(self) + (
            f", taken over from gen {known(self.previous_generation)} of "
            f"{clean(known(self.previous_holder))} (expired {short(self.previous_expires_at)})")


@event_kind("lease.renewed")
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseRenewed(Payload):
    CHANGES_LEASE = True
    STYLE = Style("lease")

    generation: int
    expires_at: str

    def fold(self, state: GoalState, at: datetime) -> Changes:
        if state.lease is None:  # never recorded: a renewal is fenced by its lease
            return {}
        return {"lease": state.lease.but(expires_at=datetime.fromisoformat(self.expires_at),
                                         last_heartbeat_at=at, active=True)}

    def line(self) -> str:
        return f"gen {known(self.generation)} renewed until {short(self.expires_at)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseEnded(Payload):
    """What both kinds that end a lease do to the goal (not a kind of its own);
    ``HOW`` is the state's ``lease_end``."""

    CHANGES_LEASE = True
    STYLE = Style("lease")
    HOW: ClassVar[str]

    def fold(self, state: GoalState, at: datetime) -> Changes:
        # A paused or blocked goal stays so; only a running one goes back to waiting.
        status = WAITING if state.status == RUNNING else state.status
        changes: Changes = {"lease": None, "status": status, "lease_end": self.HOW,
                            "since_progress": progress.lease_ended(state)}
        if self.HOW == "released" and state.ready is not None and state.ready.charge:
            # A wake made the goal ready as a recovery while this lease looked
            # stale (a late fire, a holder the server could not hear), and its
            # holder came back and released it: the attempt ended cleanly
            # after all, so pulling that wake is scheduled progress, which
            # the continuation budget never charges. (A holder that goes silent again ends in
            # lease.expired, which keeps the charge.)
            changes["ready"] = state.ready.but(charge=False)
        return changes


@event_kind("lease.released")
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseReleased(LeaseEnded):
    HOW = "released"

    generation: int
    why: str | None = optional()  # a dispatch that certainly started nothing

    def line(self) -> str:
        return f"gen {known(self.generation)} released"


@event_kind("lease.expired")
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseExpired(LeaseEnded):
    HOW = "expired"

    generation: int
    holder: str
    expired_at: str

    def line(self) -> str:
        return (f"gen {known(self.generation)} of {clean(known(self.holder))} expired at "
                f"{short(self.expired_at)}")
