"""A continuation is one fact, whoever starts it (docs/agents.md, "One
continuation per reset").

Hosts now continue a session by themselves when a usage limit resets (Claude
Code 2.1.234+'s "Continue automatically at usage limit", on by default; an
OpenClaw run). Our reset wake continuing the same session as well would make
two turns run the same next step. So each reset has exactly one
continuation, decided on the goal's locked state, whichever comes first:

- the host's own (``HostContinued``, from the hooks the host already calls):
  recorded as ``continuation.host_made``, charged once, its caller holds the
  lease; the reset's wake then stands down (``stood_down``, recorded);
- a wake's (or the agent's own pull): the host's later continuation stands
  down (``continuation.stood_down``) and its caller is told.

The resume policy is here too: ``ask`` (a person approves each reset's
continuation, through the approval gate ``resume``), ``quiet_hours`` (no
continuation inside the window: the wake waits for its end), and the bounded
grace a wake gives a host known to continue by itself.
"""

from dataclasses import dataclass
from datetime import datetime
from math import ceil
from typing import Any

from ledger.domain import timing, validation
from ledger.domain.claimed import STOOD_DOWN, WakeClaimed
from ledger.domain.codec import Payload, event_kind, optional
from ledger.domain.endings import GoalBlocked
from ledger.domain.errors import InvalidCommand
from ledger.domain.events import Changes, Event, Style, iso
from ledger.domain.interventions import ApprovalRequested
from ledger.domain.leases import acquire_events, lease_refusal, lease_stale_at
from ledger.domain.parts import Continued, LivenessAlert, iso_text
from ledger.domain.resume import RESUME_GATE, breach, quiet_until
from ledger.domain.runs import (
    ResolveApproval,
    budget_block,
    budget_spent_why,
    charge_event,
    resolve_approval,
)
from ledger.domain.state import BLOCKED, GoalState
from ledger.domain.text import clean, known, short
from ledger.domain.watchdogs import HOST, INTERNAL, WakeScheduled, reset_schedule_name

TRIGGERS = ("session_start", "prompt", "run_start")
# A host continuation's answers (the REST/CLI contract in docs/api.md).
HOST_CONTINUED = "host_continued"
NOT_A_RESET = "not_a_reset"
# The alert a host continuation against the goal's resume policy raises: the
# continuation ran, so it is recorded; a person decides what follows.
CONTINUED_AGAINST_POLICY = "CONTINUED_AGAINST_POLICY"
# The lease's ``via`` of a host's own continuation.
VIA_HOST = "host"


@dataclass(frozen=True, slots=True)
class HostContinued:
    """The host continued the goal's session by itself (a hook saw it)."""

    host: str
    trigger: str
    holder: str
    token_sha256: str
    session_key: str = ""


@dataclass(frozen=True, slots=True)
class Answer:
    """What the host's caller is told (events aside)."""

    outcome: str
    notes: str
    reset: str = ""
    continued_by: str = ""
    breaks_policy: str = ""
    retry_after_seconds: int | None = None


def approval_events(state: GoalState, now: datetime) -> list[Event]:
    """The reset's continuation asks a person (resume policy ask): the goal
    blocks on the gate ``resume``; the existing approval path notifies and
    resolves it."""
    return [Event(ApprovalRequested(
        gate=RESUME_GATE, generation=0,
        summary=f"the usage limit reset at {iso_text(state.paused_until)}: approve to continue the "
                "session"), now)]


def approved(state: GoalState, cmd: ResolveApproval, now: datetime) -> list[Event]:
    """An approval resolved; the gate ``resume`` approved (and nothing else
    pending) wakes the goal now: the reset's continuation a person allowed."""
    events = resolve_approval(state, cmd, now)
    if (cmd.gate != RESUME_GATE or cmd.decision != "approve"
            or len(state.pending_approvals) > 1):
        return events
    if state.setting("scheduler") == INTERNAL:
        return [*events, Event(WakeScheduled(kind="reset", due_at=iso(now),
                                             schedule_name=reset_schedule_name(state.goal_id)),
                               now)]
    # A host goal's host fires its wakes: the approved continuation is ready
    # for its agent to pull (charged: a continuation after a rate limit).
    return [*events, Event(WakeClaimed(
        occurrence_id=f"approval:{iso(now)}", source=HOST, kind="reset",
        outcome="ready_for_pull", reason="rate_limit_reset",
        notes="ready: a person approved continuing after the reset",
        retry_count=state.retry_count + 1, charge=True), now)]


# ------------------------------------------------------------ one per reset


def pending_reset(state: GoalState) -> str:
    """The reset whose continuation is still to come (ISO), or "": a pause
    (past its reset or not, or approved by a person), or a reset's wake
    ready for its agent."""
    if state.paused_until and state.status != BLOCKED:
        return iso(state.paused_until)  # paused, or approved (resume policy ask) and waiting
    return iso_text(state.ready.reset) if state.ready is not None else ""


def continuing(state: GoalState, now: datetime) -> Continued | None:
    """The reset continuation in progress, or None: the last reset's
    continuation still holds its lease (live or in its stale grace)."""
    last = state.continued
    if last is None or state.lease is None or state.lease.generation != last.generation:
        return None
    stale_at = lease_stale_at(state)
    return last if stale_at is not None and now < stale_at else None


def host_continued(state: GoalState, cmd: HostContinued,
                   now: datetime) -> tuple[Answer, list[Event]]:
    """The host continued the session by itself: the reset's one
    continuation, a stand-down, or no reset's at all."""
    host = validation.text(cmd.host, "host", limit=64, required=True)
    if cmd.trigger not in TRIGGERS:
        raise InvalidCommand(f"trigger must be one of {', '.join(TRIGGERS)}", field="trigger")
    if cmd.session_key and state.session_key and cmd.session_key != state.session_key:
        raise InvalidCommand("session_key is not the goal's registered session",
                             field="session_key", code="session_mismatch")
    reset = pending_reset(state)
    if reset and state.status != BLOCKED:
        wait = timing.pause_left(state, now)
        if wait:
            return Answer(NOT_A_RESET, f"the goal is paused until {reset}: a continuation "
                          "before the reset is not this reset's", reset=reset,
                          retry_after_seconds=wait), []
        return _host_wins(state, cmd, host, reset, now)
    if state.status == BLOCKED and state.pending_approvals and any(
            gate["gate"] == RESUME_GATE for gate in state.pending_approvals):
        # Resume policy ask, the approval still pending: the host went on
        # anyway. The fact is recorded against the policy; no lease (a person
        # decides), so the caller is told to do no work.
        paused_until = iso_text(state.paused_until)
        made = ContinuationHostMade(host=host, trigger=cmd.trigger, reset=paused_until,
                                    breaks_policy="ask")
        return Answer(STOOD_DOWN, "the goal waits for a person's approval to continue after "
                      "its reset; this continuation was recorded against the goal's resume "
                      "policy: do no work on the goal", reset=paused_until,
                      breaks_policy="ask"), [Event(made, now)]
    last = continuing(state, now)
    if last is not None:
        why = (f"the reset of {iso(last.reset)} was continued already ({last.by}, "
               f"{iso(last.at)}); no second continuation")
        down = ContinuationStoodDown(host=host, trigger=cmd.trigger, continued_by=last.by,
                                     reset=iso(last.reset), why=why)
        return Answer(STOOD_DOWN, why + ": end this run without working on the goal",
                      reset=iso(last.reset), continued_by=last.by), [Event(down, now)]
    return Answer(NOT_A_RESET, "the goal is not waiting for a reset's continuation"), []


def _host_wins(state: GoalState, cmd: HostContinued, host: str, reset: str,
               now: datetime) -> tuple[Answer, list[Event]]:
    # A live lease cannot be there (a pause's report released it), but a
    # ready reset's claim may race a stale holder: never steal a live lease.
    refusal = lease_refusal(state, now)
    if refusal is not None:
        return Answer(NOT_A_RESET, refusal["why"], reset=reset,
                      retry_after_seconds=refusal["retry_after_seconds"]), []
    broken = breach(state, now)
    made = ContinuationHostMade(host=host, trigger=cmd.trigger, reset=reset,
                                breaks_policy=broken or None)
    events = [Event(made, now)]
    # The continuation budget: a continuation after a rate limit is a recovery, charged once
    # (whoever makes it); with the budget spent the goal stops, as a wake's.
    block = budget_block(state)
    if block:
        events.append(Event(GoalBlocked(summary=budget_spent_why(state, block), generation=0,
                                        reason=block), now))
        return Answer(STOOD_DOWN, budget_spent_why(state, block), reset=reset,
                      breaks_policy=broken), events
    events.append(charge_event(state, f"host:{host}:reset:{reset}", now))
    events += acquire_events(state, cmd.holder, cmd.token_sha256, now, via=VIA_HOST)
    notes = "this continuation is the reset's one: the lease is yours"
    if broken:
        notes += f" (recorded against the goal's resume policy: {broken}; a person is told)"
    return Answer(HOST_CONTINUED, notes, reset=reset, continued_by=VIA_HOST,
                  breaks_policy=broken), events


def host_events(state: GoalState, cmd: HostContinued, now: datetime) -> list[Event]:
    return host_continued(state, cmd, now)[1]


def recorded_answer(payloads: list[Any], state: GoalState, cmd: HostContinued,
                    now: datetime) -> Answer:
    """The caller's answer, read from what the command recorded (never a
    second decision with a later clock); when it recorded nothing (not a
    reset's continuation) nothing can contradict deciding it again."""
    made = next((p for p in payloads if isinstance(p, ContinuationHostMade)), None)
    down = next((p for p in payloads if isinstance(p, ContinuationStoodDown)), None)
    if down is not None:
        return Answer(STOOD_DOWN, down.why + ": end this run without working on the goal",
                      reset=down.reset, continued_by=down.continued_by)
    if made is not None:
        broken = made.breaks_policy or ""
        if (state.lease is not None and state.lease.via == VIA_HOST
                and state.continued is not None and iso(state.continued.reset) == made.reset):
            notes = "this continuation is the reset's one: the lease is yours"
            if broken:
                notes += (f" (recorded against the goal's resume policy: {broken}; a person "
                          "is told)")
            return Answer(HOST_CONTINUED, notes, reset=made.reset, continued_by=VIA_HOST,
                          breaks_policy=broken)
        why = (state.summary if state.status == BLOCKED and state.reason != "BLOCKED_APPROVAL"
               else "the goal waits for a person's approval to continue after its reset")
        return Answer(STOOD_DOWN, f"{why}; this continuation was recorded: do no work on the "
                      "goal", reset=made.reset, breaks_policy=broken)
    return host_continued(state, cmd, now)[0]


def wake_stands_down(state: GoalState, kind: str) -> dict[str, Any] | None:
    """A reset's wake whose reset was continued already (the host by itself,
    the agent's own pull; its row fired before that and its claim came
    after): it stands down, recorded, and nothing is dispatched."""
    last = state.continued
    if kind != "reset" or state.reset_wake is not None or timing.paused(state) or last is None:
        return None
    return {"outcome": STOOD_DOWN,
            "notes": f"the session was continued already after the reset of {iso(last.reset)} "
                     f"({last.by}, {iso(last.at)}): no second continuation"}


def quiet_wait(state: GoalState, now: datetime) -> dict[str, Any] | None:
    """A wake inside the goal's quiet hours: not due until the window ends."""
    ends = quiet_until(state, now)
    if ends is None:
        return None
    return {"outcome": "not_due", "quiet_until": ends,
            "notes": f"quiet hours: no continuation until {ends.isoformat()}",
            "retry_after_seconds": max(1, ceil((ends - now).total_seconds()))}


def after_quiet(state: GoalState, kind: str, ends: datetime, now: datetime) -> list[Event]:
    """A one-off wake that fired inside the quiet window: its row ran
    (django-q2 drops a ONCE row), so it is scheduled again at the window's end."""
    pending = {"reset": state.reset_wake, "requested": state.requested_wake}.get(kind)
    if pending is None or not pending.schedule_name:
        return []
    return [Event(WakeScheduled(kind=kind, due_at=iso(ends),
                                schedule_name=pending.schedule_name,
                                reason=pending.reason), now)]


# ---------------------------------------------------------------- the continuation kinds


@event_kind("continuation.host_made")
@dataclass(frozen=True, slots=True, kw_only=True)
class ContinuationHostMade(Payload):
    STYLE = Style("continuation")

    host: str  # who continued: claude-code, openclaw, ...
    trigger: str  # session_start | prompt | run_start: the hook that told us
    reset: str  # the pause's end it continued (ISO)
    # The goal's resume policy said no (ask without an approval, quiet hours):
    # the continuation stands (it ran), and the goal is listed for a person.
    breaks_policy: str | None = optional()

    def fold(self, state: GoalState, at: datetime) -> Changes:
        if not self.breaks_policy:
            return {}
        return {"liveness_alert": LivenessAlert(
            reason=CONTINUED_AGAINST_POLICY, at=at,
            detail=f"{self.host} continued the session after the reset of {self.reset} "
                   f"against the resume policy ({self.breaks_policy})")}

    def line(self) -> str:
        return (f"{clean(known(self.host))} continued the session itself after the reset of "
                f"{short(self.reset)} ({known(self.trigger)})"
                + (f", against the resume policy ({known(self.breaks_policy)})"
                   if self.breaks_policy else ""))


@event_kind("continuation.stood_down")
@dataclass(frozen=True, slots=True, kw_only=True)
class ContinuationStoodDown(Payload):
    """A host's continuation that lost: the reset was continued already (a
    wake's stand-down is its wake.claimed, outcome ``stood_down``)."""

    STYLE = Style("continuation")

    host: str
    trigger: str
    continued_by: str  # how the winner took the lease: wake | pull | host
    reset: str
    why: str

    def fold(self, state: GoalState, at: datetime) -> Changes:
        return {}  # history only: the winner's own events changed the goal

    def line(self) -> str:
        return (f"{clean(known(self.host))}'s continuation stood down: the reset of "
                f"{short(self.reset)} was continued already ({known(self.continued_by)})")
