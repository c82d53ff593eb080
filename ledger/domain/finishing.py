"""Finishing (verified completion) and keeping a goal alive after every command
(docs/design.md, "Wakes and claims").

A finish completes only with every blocking job ended and the watchdog
cancelled: a host watchdog's cancellation receipt is what a requested finish
waits for. ``settle`` is decided once, after every command.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ledger.domain import timing, validation, watchdogs
from ledger.domain.claims import ready_for_pull
from ledger.domain.codec import Payload, encode, event_kind, optional
from ledger.domain.commands import FINISH_STATUSES, Finish
from ledger.domain.endings import GoalBlocked, GoalCompleted, GoalFailed
from ledger.domain.errors import DomainError, InvalidCommand
from ledger.domain.events import Changes, Event, Json, Style, iso
from ledger.domain.leases import fence
from ledger.domain.state import BLOCKED, GoalState
from ledger.domain.text import known
from ledger.domain.watchdogs import (
    HOST,
    INTERNAL,
    OPERATOR,
    RecordReceipt,
    arm_events,
    cancel_events,
    watchdog_live,
)


def finish(state: GoalState, cmd: Finish, now: datetime) -> list[Event]:
    lease = fence(state, cmd.proof)
    if cmd.status not in FINISH_STATUSES:
        raise InvalidCommand(f"status must be one of {', '.join(FINISH_STATUSES)}.",
                             field="status")
    completed = cmd.status == "completed"
    summary = validation.text(cmd.summary, "summary", limit=validation.MAX_NOTE, required=completed)
    evidence = _evidence(state, cmd) if completed else []
    if cmd.evidence and not completed:
        raise InvalidCommand("evidence goes with status completed; say in the summary what "
                             "held and what did not.", field="evidence")
    # Verified completion: every job terminal, the watchdog cancelled.
    return finish_events(state, cmd.status, summary, lease.generation, now,
                         evidence=evidence)


def _evidence(state: GoalState, cmd: Finish) -> list[dict[str, str]]:
    """One item per done criterion, none unknown, none twice; in the criteria's order."""
    if not isinstance(cmd.evidence, list | tuple) or len(cmd.evidence) > validation.MAX_ITEMS:
        raise InvalidCommand(f"evidence must be a list of at most {validation.MAX_ITEMS} items.",
                             field="evidence")
    given: dict[str, str] = {}
    for i, item in enumerate(cmd.evidence):
        name = f"evidence[{i}]"
        criterion = validation.text(item.criterion, f"{name}.criterion",
                                    limit=validation.MAX_ITEM, required=True)
        if criterion not in state.done_criteria:
            raise InvalidCommand("not one of the goal's done criteria (give its exact text).",
                                 field=f"{name}.criterion")
        if criterion in given:
            raise InvalidCommand("this criterion already has evidence.",
                                 field=f"{name}.criterion")
        given[criterion] = validation.text(item.evidence, f"{name}.evidence",
                                           limit=validation.MAX_NOTE, required=True)
    missing = [c for c in state.done_criteria if c not in given]
    if missing:
        raise InvalidCommand(
            f"completed needs evidence for each done criterion; missing {len(missing)}: "
            + "; ".join(repr(c) for c in missing[:3]) + (" …" if len(missing) > 3 else ""),
            field="evidence")
    # A criterion listed twice at the start needs (and gets) one item.
    return [{"criterion": c, "evidence": given[c]} for c in dict.fromkeys(state.done_criteria)]


def finish_events(state: GoalState, status: str, summary: str, generation: int,
                  now: datetime, *, evidence: list[dict[str, str]] | None = None) -> list[Event]:
    """The events of a finish, once the decider has fenced and validated it."""
    running = state.running_jobs()
    if running:
        raise DomainError(
            f"{len(running)} blocking job(s) still running (first: {running[0]['kind']} "
            f"{running[0]['ref']}); record their status first", code="jobs_running")
    request = {"status": status, "summary": summary, "generation": generation,
               **({"evidence": evidence} if status == "completed" else {})}
    if watchdog_live(state) and state.scheduler_backend == HOST:
        events = [] if state.finish_requested else [
            Event(GoalFinishRequested(**request), now)]
        return events + cancel_events(state, now, why="the goal is finishing")
    events = cancel_events(state, now, why="the goal finished")  # internal: cancelled now
    return events + complete(state, request, now)


def complete(state: GoalState, request: dict[str, Any], now: datetime) -> list[Event]:
    """The ending a finish asked for. ``request`` is the finish as the goal
    keeps it (``finish_requested``, the stored JSON of its event)."""
    summary, generation = request["summary"], request["generation"]
    if request["status"] == "completed":
        return [Event(GoalCompleted(summary=summary, generation=generation,
                                    evidence=list(request["evidence"])), now)]
    if request["status"] == "failed":
        return [Event(GoalFailed(summary=summary, generation=generation, reason=""), now)]
    return [Event(GoalBlocked(summary=summary, generation=generation, reason="AGENT_BLOCKED"),
                  now)]


def completion_state(state: GoalState) -> str:
    if state.finish_requested and not state.terminal:
        return "pending_native_cleanup"
    return {"done": "completed", "failed": "failed", "blocked": "blocked"}.get(
        state.status, state.status)


def receipt(state: GoalState, cmd: RecordReceipt, now: datetime) -> list[Event]:
    """A host watchdog's receipt, and the finish it completes."""
    events = watchdogs.receipt(state, cmd, now)
    if cmd.status in ("cancelled", "user_attested_deleted") and state.finish_requested \
            and not state.terminal:
        # Verified completion: the cancellation receipt was what the finish waited for.
        events += complete(state, state.finish_requested, now)
    return events


def settle(before: GoalState, after: GoalState, now: datetime) -> list[Event]:
    """What a command's events (``before`` -> ``after``) leave to do so that no
    goal is ever silently stuck (docs/design.md, "Liveness"). Decided once, for every
    command:

    - a goal that becomes blocked keeps no internal schedule firing at it
      (an operator's recover or approval re-arms it);
    - an internal goal that would be stuck (no lease, no pending wake) or that
      is ready gets its watchdog (re)armed: due at once after an operator
      unblocked it, at the next interval otherwise. A ready goal needs it too:
      each further slot nobody pulls counts against the wake-loop bound, so it ends visibly
      blocked instead of waiting forever;
    - a host goal an operator unblocked is made ready for its agent to pull,
      since only its host can re-create its schedule.
    """
    if after.terminal or after.finish_requested:
        return []
    if after.status == BLOCKED:
        if watchdog_live(after) and after.scheduler_backend == INTERNAL:
            return cancel_events(after, now, why=f"blocked ({after.reason})")
        return []
    unblocked = before.status == BLOCKED
    stuck = timing.nothing_fires(after)
    if not stuck and not (after.ready is not None and after.lease is None):
        return []
    backend = after.setting("scheduler")
    if backend == INTERNAL and after.watchdog_status not in timing.FIRING:
        interval = after.interval_seconds
        first = now if unblocked else now + timedelta(seconds=interval)
        return arm_events(after, interval, iso(first), now)
    if backend == HOST and unblocked and stuck:
        return [ready_for_pull(f"operator:unblocked:{after.version}", OPERATOR, "operator",
                               "scheduled_progress",
                               "unblocked by an operator: ready for its agent to pull", 0, now)]
    return []


def cancel_on_stop(state: GoalState, now: datetime) -> list[Event]:
    """A stopped goal keeps no internal schedule; a host one is asked to go."""
    return cancel_events(state, now, why="stopped by an operator")


@event_kind("goal.finish_requested")
@dataclass(frozen=True, slots=True, kw_only=True)
class GoalFinishRequested(Payload):
    """A finish that waits for its host watchdog's cancellation receipt."""

    STYLE = Style("goal")

    status: str  # completed | failed | blocked
    summary: str
    generation: int
    evidence: list[Json] | None = optional()  # with completed

    def fold(self, state: GoalState, at: datetime) -> Changes:
        # The goal keeps the request as it was stored (a renewal it carried too):
        # ``complete`` reads it when the cancellation receipt arrives.
        return {"finish_requested": encode(self), "reason": "PENDING_NATIVE_CLEANUP"}

    def line(self) -> str:
        return (f"finish as {known(self.status)} requested; waits for the host watchdog's "
                "cancellation")
