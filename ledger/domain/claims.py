"""Wake claims (the continuation budget, the wake-loop bound, one watchdog
per goal; docs/design.md, "Wakes and claims"): slots and occurrences, the
outcome of a claim and an operator's wake now (a due wake's pull is
``ledger.domain.pulls``, a push's result ``ledger.domain.dispatches``).

A wake is claimed in one transaction and answers exactly one outcome. The
kind ``wake.claimed`` and how it folds are ``ledger.domain.claimed``.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from math import ceil
from typing import Any

from ledger.domain import continuations, progress, timing, validation
from ledger.domain.claimed import GRANTED, WakeClaimed
from ledger.domain.endings import GoalBlocked
from ledger.domain.errors import DomainError, InvalidCommand
from ledger.domain.events import Event, iso
from ledger.domain.interruptions import interrupted, interrupted_events, lease_expired_event
from ledger.domain.leases import Unheard, acquire_events, judged_unheard, lease_refusal
from ledger.domain.parts import iso_text
from ledger.domain.resume import wants_approval
from ledger.domain.runs import budget_block, budget_spent_why, charge_event
from ledger.domain.state import BLOCKED, GoalState
from ledger.domain.watchdogs import (
    HOST,
    INTERNAL,
    OPERATOR,
    cancel_events,
    watchdog_live,
)

WAKE_KINDS = ("recurring", "reset", "requested", "operator")
WAKE_REASONS = ("timeout_recovery", "rate_limit_reset", "dependency_ready", "scheduled_progress")


@dataclass(frozen=True, slots=True)
class ClaimWake:
    occurrence_id: str  # "" from a host: its slot stands for it
    source: str  # internal (django-q2 fired) | host (the agent's host fired) | operator
    holder: str  # the lease holder; for an operator, the operator's name
    token_sha256: str
    reason: str = ""  # host may say why; otherwise derived
    kind: str = "recurring"  # recurring (the watchdog) | reset | requested | operator
    intended_at: str = ""  # internal: the slot django-q2 meant to run (ISO)
    push: bool = False  # internal: a push dispatcher will start the continuation
    # The configured dispatchers that hand over the lease their wake grants:
    # a goal naming one is pushed, decided here on the locked state (no
    # unlocked pre-read of the goal by the shell).
    push_dispatchers: frozenset[str] = frozenset()
    note: str = ""  # an operator's why
    operator: str = ""  # an operator's name (source operator)
    # The shell's recent window in which the server could not be heard from
    # (``leases.unheard_grace``): a fire right after an outage must not judge
    # the holder silent, or its attempt a recovery, for heartbeats the outage
    # refused — as the sweeper does not (seed 2, 30 days). ``leases.UNREAD``:
    # the shell reads it only if the decision asks (``leases.UnheardNeeded``).
    unheard: Unheard | str = None


@dataclass(frozen=True, slots=True)
class WakeNow:
    """An operator's "wake now" (recorded with who and why)."""

    operator: str
    reason: str
    occurrence_id: str
    token_sha256: str
    push: bool = False
    push_dispatchers: frozenset[str] = frozenset()


def ready_for_pull(occurrence_id: str, source: str, kind: str, reason: str, notes: str,
                   retry_count: int, now: datetime) -> Event:
    """A wake.claimed that makes a goal ready for its agent to pull, charging nothing."""
    return WakeClaimed(occurrence_id=occurrence_id, source=source, kind=kind,
                       outcome="ready_for_pull", reason=reason, notes=notes,
                       retry_count=retry_count, charge=False).event(now)


def recovery(state: GoalState) -> bool:
    """The continuation budget: would resuming now be a recovery continuation (charged)? Yes
    when the goal's last attempt did not end cleanly: its lease is still there
    (it went stale) or expired, or a rate limit paused it."""
    return (state.lease is not None or state.lease_end == "expired"
            or state.paused_until is not None)


def _slot(state: GoalState, cmd: ClaimWake, now: datetime) -> datetime | None:
    """The recurring slot a fire belongs to (None for one-off wakes)."""
    if cmd.kind != "recurring" or state.watchdog is None:
        return None
    return timing.slot_of(state.watchdog, _intended(cmd, now))


def _intended(cmd: ClaimWake, now: datetime) -> datetime:
    """When the fire was meant to happen: django-q2's intended run time, or now."""
    try:
        fired = datetime.fromisoformat(cmd.intended_at) if cmd.intended_at else now
    except ValueError:
        return now  # not a time: the occurrence id still names the fire
    return fired if fired.tzinfo is not None else now


@dataclass(frozen=True, slots=True)
class Verdict:
    """A claim's decision, made once: its occurrence (the identity
    already_claimed compares), the slot it belongs to, and the outcome with
    its notes. The store hands it back with the claim's outcome, so the
    claimant's answer reads it instead of deciding again with a later clock."""

    occurrence_id: str
    slot: datetime | None
    answer: dict[str, Any]
    # A host fire that re-anchors the goal's slots on the host's own schedule
    # (``reanchor``): the new anchor, which is this fire's slot.
    anchor: datetime | None = None

    @property
    def outcome(self) -> str:
        return self.answer["outcome"]


def occurrence_of(cmd: ClaimWake, slot: datetime | None) -> str:
    """A claim's identity. A host fire without an id of its own is its slot."""
    if cmd.occurrence_id:
        return validation.text(cmd.occurrence_id, "occurrence_id", limit=300, required=True)
    if slot is None:
        raise InvalidCommand("occurrence_id is required when the goal has no watchdog",
                             field="occurrence_id")
    return f"{cmd.source}:slot:{iso(slot)}"


def judge(state: GoalState, cmd: ClaimWake, now: datetime) -> Verdict:
    """The claim's verdict: slot and occurrence computed once, then the outcome."""
    slot = _slot(state, cmd, now)
    anchor = reanchor(state, cmd, slot, now)
    if anchor is not None:
        slot = anchor  # the fire is on time for the host's own slots
    occurrence = occurrence_of(cmd, slot)
    return Verdict(occurrence, slot, _outcome(state, cmd, now, occurrence, slot), anchor)


def reanchor(state: GoalState, cmd: ClaimWake, slot: datetime | None,
             now: datetime) -> datetime | None:
    """The host is the truth of when its task fires (docs/design.md: "the host's
    schedule is what fires"). A receipt's ``due_at`` within the receipt
    tolerance but off the task's real slots (a typo, a zone slip) makes every
    fire early, so every claim would be ``not_due`` forever. When a host fire
    is early and the previous host fire was early too, a whole number of
    intervals before it (within ``timing.reanchor_tolerance``), the host fires
    at a consistent offset: its fire becomes the anchor and is on time. A
    host that fires too often (consecutive fires less than an interval apart)
    never qualifies, so it still gets ``not_due``. The new anchor, or None."""
    watchdog = state.watchdog
    if (cmd.source != HOST or cmd.kind != "recurring" or slot is None or watchdog is None
            or watchdog.backend != HOST or watchdog.status != "live"
            or watchdog.early_fire is None or timing.pause_left(state, now)
            or timing.early_by(watchdog, slot, now) <= 0):
        return None
    previous = watchdog.early_fire
    gap = (now - previous).total_seconds()
    every = watchdog.interval_seconds
    intervals = round(gap / every) if every else 0
    if intervals < 1 or abs(gap - intervals * every) > timing.reanchor_tolerance(watchdog):
        return None
    # The earlier of the two fires' offsets: hosts fire late more than early,
    # so later fires then land on time or late (a late fire keeps its slot).
    return min(now, previous + timedelta(seconds=intervals * every))


def claim_outcome(state: GoalState, cmd: ClaimWake, now: datetime) -> dict[str, Any]:
    """Which of the outcomes a claim gets, and why. Pure; ``claim`` turns it
    into events and the shell reports it."""
    return judge(state, cmd, now).answer


def _outcome(state: GoalState, cmd: ClaimWake, now: datetime, occurrence: str,
             slot: datetime | None) -> dict[str, Any]:
    if occurrence in state.claimed:
        return {"outcome": "already_claimed", "notes": "this occurrence was handled already"}
    if superseded(state, cmd, occurrence, slot):
        return {"outcome": "already_claimed",
                "notes": "a later claim already stood for this slot (a queued backlog)"}
    ended = _not_resumable(state)
    if ended is not None:
        return ended
    if (cmd.source == HOST and state.watchdog is not None and state.watchdog.backend == HOST
            and state.watchdog.status in ("requested", "uncertain")):
        return {"outcome": "receipt_required",
                "notes": "the host watchdog's creation is not confirmed; record a receipt "
                         "(created, create_failed or user_attested_deleted) first"}
    operator = cmd.source == OPERATOR
    # One continuation per reset: a reset's wake whose reset the host (or
    # the agent's own pull) continued already stands down. An operator's
    # wake is a person's decision, never stood down.
    down = None if operator else continuations.wake_stands_down(state, cmd.kind)
    if down is not None:
        return down
    early = None if operator else _not_due(state, slot, now)
    if early is not None:
        return early
    quiet = None if operator else continuations.quiet_wait(state, now)
    if quiet is not None:
        return quiet
    unheard = judged_unheard(state, cmd.unheard)
    if interrupted(state, now, unheard):
        return {"outcome": "terminal_cleanup_required", "interrupted": True,
                "notes": "the last continuation's lease expired without a heartbeat, "
                         "checkpoint or outcome: INTERRUPTED_UNKNOWN"}
    # An operator's wake ends a pause early; a live worker still comes first,
    # and so does one the server could not hear during an outage.
    refusal = lease_refusal(state.but(paused_until=None) if operator else state, now,
                            unheard)
    if refusal is not None:
        return {"outcome": "worker_busy_noop", "notes": refusal["why"],
                "retry_after_seconds": refusal["retry_after_seconds"]}
    # The wake-loop bound, and the empty loop: a wake that would resume a goal whose last
    # turns all ended without progress (ledger.domain.progress) burns quota
    # on nothing; it is not dispatched, and a person is told. This wake would
    # be wake retry_count + 1 since the last progress; the turns that ended
    # empty count the first turn (before any wake) too.
    limit = state.setting("max_wake_retries")
    if not operator and (state.retry_count + 1 > limit
                         or progress.empty_turns(state) > limit):
        return {"outcome": "terminal_cleanup_required", "block": "WAKE_RETRIES_EXHAUSTED",
                "notes": f"{state.retry_count} wakes and {progress.empty_turns(state)} turns "
                         "without progress: WAKE_RETRIES_EXHAUSTED"}
    charge = recovery(state) and not operator
    block = budget_block(state) if charge else ""
    if block:
        return {"outcome": "terminal_cleanup_required", "block": block,
                "notes": budget_spent_why(state, block)}
    if not operator and wants_approval(state):
        # Resume policy ask: a person approves this reset's continuation (the
        # approval gate "resume"; its approval schedules the wake again).
        return {"outcome": "approval_required",
                "notes": "the resume policy asks a person to approve continuing after the "
                         f"reset of {iso_text(state.paused_until)}"}
    if cmd.source != HOST and not pushed(state, cmd):
        # Dispatcher "none" is pull: a due wake hands a lease to nobody. The
        # goal is ready; its agent's own claim, run_goal or lease call takes it.
        return {"outcome": "ready_for_pull", "charge": charge,
                "notes": "ready: the goal's agent resumes it by taking its lease"}
    return {"outcome": "recurring_acquired", "charge": charge,
            "notes": "resume from the latest checkpoint"}


def superseded(state: GoalState, cmd: ClaimWake, occurrence: str,
               slot: datetime | None) -> bool:
    """A recurring internal fire of a slot an earlier claim already stood
    for: workers that stalled (a hang, a busy queue) run a goal's queued
    fires in seconds, one per slot they missed. The first claim moved the
    watchdog's next due time past them all (``_next_due``), so each later
    one is a slot behind it: one claim per goal and slot, never a wake
    counted against the wake-loop bound per queued task. The last claim's own occurrence
    may come again (a busy answer is retried)."""
    if cmd.source != INTERNAL or cmd.kind != "recurring" or slot is None:
        return False
    due = state.watchdog.next_due_at if state.watchdog is not None else None
    return due is not None and slot < due and (
        state.last_wake is None or occurrence != state.last_wake.occurrence_id)


def _not_resumable(state: GoalState) -> dict[str, Any] | None:
    """A goal that finished (or waits only for its watchdog's cleanup) or that
    needs a human is never resumed by a wake: the outcome, or None."""
    live = watchdog_live(state)
    if state.terminal or state.finish_requested:
        what = state.status if state.terminal else "finished, pending native cleanup"
        if live:
            return {"outcome": "terminal_cleanup_required",
                    "notes": f"the goal is {what}; cancel its watchdog, resume nothing"}
        return {"outcome": "terminal_noop", "notes": f"the goal is {what}"}
    if state.status == BLOCKED:
        if live and state.scheduler_backend == INTERNAL:
            # A blocked goal keeps no internal schedule (settle cancels it);
            # one that survived from an older release goes now.
            return {"outcome": "terminal_cleanup_required",
                    "notes": f"the goal is blocked ({state.reason}); cancel its watchdog, "
                             "resume nothing"}
        # Not terminal: an operator may recover it, and its host watchdog is
        # then needed again. Nothing is consumed or cancelled.
        return {"outcome": "terminal_noop",
                "notes": f"the goal is blocked ({state.reason}); resume nothing until an "
                         "operator acts"}
    return None


def _not_due(state: GoalState, slot: datetime | None, now: datetime) -> dict[str, Any] | None:
    """A fire before its time (a pause not over yet, a slot still ahead): not_due, or None."""
    wait = timing.pause_left(state, now)
    if wait:
        return {"outcome": "not_due", "notes": f"paused until {iso_text(state.paused_until)}",
                "retry_after_seconds": wait}
    if slot is not None and timing.early_by(state.watchdog, slot, now) > 0:
        # ``early``: the slot has not come, so it is not claimed (the
        # watchdog's next due time stays; see ``reanchor``).
        return {"outcome": "not_due", "notes": f"the next wake is due at {iso(slot)}",
                "retry_after_seconds": ceil((slot - now).total_seconds()), "early": True}
    return None


def pushed(state: GoalState, cmd: ClaimWake) -> bool:
    """Whether a granted internal or operator wake is pushed to a dispatcher
    that starts the continuation with its lease (else it is pulled)."""
    return cmd.source != HOST and (cmd.push or state.setting("dispatch") in cmd.push_dispatchers)


def _reason(state: GoalState, cmd: ClaimWake) -> str:
    if cmd.reason:
        if cmd.reason not in WAKE_REASONS:
            raise InvalidCommand(f"reason must be one of {', '.join(WAKE_REASONS)}",
                                 field="reason")
        return cmd.reason
    if state.lease is not None or state.lease_end == "expired":
        return "timeout_recovery"
    if state.paused_until:
        return "rate_limit_reset"
    if cmd.kind == "requested" and state.requested_wake is not None \
            and state.requested_wake.reason:
        return state.requested_wake.reason
    # Jobs keep their times as ISO text, which orders as the instants do.
    since = iso_text(state.last_wake.at) if state.last_wake is not None else ""
    if any(job["status"] != "running" and job["updated_at"] > since for job in state.jobs):
        return "dependency_ready"
    return "scheduled_progress"


def _claim(state: GoalState, cmd: ClaimWake, now: datetime,
           verdict: Verdict | None = None) -> tuple[Verdict, list[Event]]:
    if cmd.source not in (INTERNAL, HOST, OPERATOR):
        raise InvalidCommand("source must be internal, host or operator", field="source")
    if cmd.kind not in WAKE_KINDS:
        raise InvalidCommand(f"kind must be one of {', '.join(WAKE_KINDS)}", field="kind")
    verdict = verdict or judge(state, cmd, now)
    occurrence, slot, answer = verdict.occurrence_id, verdict.slot, verdict.answer
    outcome = answer["outcome"]
    if outcome in ("already_claimed", "receipt_required"):
        return verdict, []  # nothing changes, not even the record of a claim
    operator = cmd.source == OPERATOR
    early = bool(answer.get("early"))
    if verdict.anchor is not None:
        next_due: str | None = iso(verdict.anchor + timedelta(seconds=state.interval_seconds))
    else:
        # An early fire claims no slot: the watchdog's next due time (and
        # the HOST_SILENT deadline counted from it) stays where it was.
        next_due = None if early else _next_due(state, slot, now)
    record = WakeClaimed(
        occurrence_id=occurrence, source=cmd.source, kind=cmd.kind, outcome=outcome,
        reason=_reason(state, cmd), notes=answer["notes"],
        slot=iso(slot) if slot is not None else None, next_due_at=next_due,
        early=True if early and cmd.source == HOST else None,
        anchor=iso(verdict.anchor) if verdict.anchor is not None else None,
        operator=validation.text(cmd.operator, "operator", limit=validation.MAX_KEY, required=True)
        if operator else None,
        why=validation.text(cmd.note, "reason", limit=validation.MAX_NOTE, required=True)
        if operator else None,
        # The wake-loop bound: a wake without progress until a checkpoint says otherwise.
        # A ready goal that nobody pulls counts each further due wake too, so
        # it ends visibly blocked instead of waiting forever.
        retry_count=state.retry_count + 1 if outcome in GRANTED else None,
        retry_after_seconds=answer.get("retry_after_seconds"),
        charge=answer["charge"] or (state.ready is not None and state.ready.charge)
        if outcome == "ready_for_pull" else None)
    return verdict, [record.event(now), *_claim_effects(state, cmd, answer, occurrence, now)]


def _next_due(state: GoalState, slot: datetime | None, now: datetime) -> str | None:
    """The next slot after the one that fired: claims never move the anchor.
    A fire so late that later slots passed too (the scheduler was down)
    stands for them all: the next is the first slot ahead, as django-q2
    (catch_up off) and a host's scheduler fire it — never a replay of each
    missed slot, which the wake-loop bound would count as wakes without progress. None
    when it would not move the watchdog's next due time forward."""
    watchdog = state.watchdog
    if slot is None or watchdog is None:
        return None
    following = slot + timedelta(seconds=watchdog.interval_seconds)
    if following <= now:
        following = timing.slot_after(watchdog, now) or following
    current = watchdog.next_due_at
    if current is None or following > current:
        return iso(following)
    return None


def _claim_effects(state: GoalState, cmd: ClaimWake, answer: dict[str, Any], occurrence: str,
                   now: datetime) -> list[Event]:
    """What a claim's outcome does besides its record: block, clean up, or grant."""
    outcome = answer["outcome"]
    events: list[Event] = []
    if outcome == "terminal_cleanup_required":
        if answer.get("interrupted"):
            events += interrupted_events(state, now)
        elif answer.get("block"):
            if state.lease is not None:
                events.append(lease_expired_event(state, now))
            events.append(Event(GoalBlocked(summary=answer["notes"], generation=0,
                                            reason=answer["block"]), now))
        else:
            events += cancel_events(state, now, why=answer["notes"])
    if outcome == "approval_required":
        events += continuations.approval_events(state, now)
    if answer.get("quiet_until"):
        events += continuations.after_quiet(state, cmd.kind, answer["quiet_until"], now)
    if outcome == "recurring_acquired":
        if answer["charge"]:
            # The continuation budget: a recovery continuation is charged in the transaction
            # that grants its lease, before anything is dispatched: a crash
            # after this commit never yields a free retry (the uncertain-attempt rule then stops
            # the silent attempt).
            events.append(charge_event(state, occurrence, now))
        events += acquire_events(state, cmd.holder or state.agent, cmd.token_sha256, now,
                                 via="wake")
    return events


def operator_claim(cmd: WakeNow) -> ClaimWake:
    """The claim an operator's "wake now" makes (built here alone)."""
    return ClaimWake(cmd.occurrence_id, OPERATOR, "", cmd.token_sha256, kind="operator",
                     push=cmd.push, push_dispatchers=cmd.push_dispatchers,
                     note=cmd.reason, operator=cmd.operator)


def _operator_wake(state: GoalState, cmd: WakeNow,
                   now: datetime) -> tuple[Verdict, list[Event]]:
    """An operator's "wake now": ends a pause early and resumes the goal as a
    wake would (pull or push), recorded with who and why."""
    if state.terminal or state.status == BLOCKED:
        raise DomainError(f"a {state.status} goal cannot be woken; "
                          + ("recover it first" if state.status == BLOCKED else
                             "start a new one"), code="not_wakeable")
    claim_cmd = operator_claim(cmd)
    verdict = judge(state, claim_cmd, now)
    if verdict.outcome == "worker_busy_noop":
        raise DomainError(f"there is nothing to wake: {verdict.answer['notes']}",
                          code="not_wakeable",
                          retry_after_seconds=verdict.answer.get("retry_after_seconds"))
    return _claim(state, claim_cmd, now, verdict)


def decided(state: GoalState, cmd: ClaimWake | WakeNow,
            now: datetime) -> tuple[Verdict, list[Event]]:
    """A claim (or an operator's wake) decided: its verdict and its events."""
    if isinstance(cmd, WakeNow):
        return _operator_wake(state, cmd, now)
    return _claim(state, cmd, now)
