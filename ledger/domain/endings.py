"""How a goal ends: ``goal.completed``, ``goal.failed``, ``goal.blocked``.

Decided in many places (a finish, a rejected gate, a spent continuation
budget, a silent continuation, a host that continued against policy), so the
kinds live here, below every module that decides one; what a finish needs
first (verified completion) is ``ledger.domain.finishing``.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from ledger.domain.codec import Payload, event_kind, optional
from ledger.domain.events import Changes, Json, Style
from ledger.domain.state import BLOCKED, DONE, FAILED, GoalState
from ledger.domain.text import clean, known


@dataclass(frozen=True, slots=True, kw_only=True)
class Ending(Payload):
    """What the three endings do to the goal (not a kind of its own):
    ``STATUS`` is the status it ends in, ``VERB`` what its line says."""

    CHANGES_LEASE = True
    STATUS: ClassVar[str]
    VERB: ClassVar[str]

    summary: str  # the agent's (or the rule's) words
    generation: int

    def fold(self, state: GoalState, at: datetime) -> Changes:
        # Nothing pending survives an ending: no due wake, no one-off wake.
        changes = {"status": self.STATUS, "reason": getattr(self, "reason", ""),
                   "summary": self.summary, "lease": None,
                   "lease_end": "finished" if state.lease is not None else state.lease_end,
                   "finish_requested": {}, "paused_until": None, "ready": None,
                   "reset_wake": None, "requested_wake": None,
                   "liveness_alert": None, "unclaimed": None}
        if self.STATUS == DONE:
            # A completion carries evidence for every done criterion (finishing
            # refuses one without): the goal is done, so its progress is 100 %,
            # whatever the last checkpoint said (docs/decisions.md).
            changes["progress_pct"] = 100
        return changes

    def line(self) -> str:
        reason = getattr(self, "reason", "")  # a completion has none
        said = clean(known(self.summary), 120)
        return f"{self.VERB}{f' ({reason})' if reason else ''}" + (f": {said}" if said else "")


@event_kind("goal.completed")
@dataclass(frozen=True, slots=True, kw_only=True)
class GoalCompleted(Ending):
    STATUS, VERB = DONE, "completed"
    STYLE = Style("goal", colour="bold-green")

    # One {criterion, evidence} per done criterion (none without criteria).
    evidence: list[Json]

    def line(self) -> str:
        return Ending.line(self) + _evidence(self.evidence)


@event_kind("goal.failed")
@dataclass(frozen=True, slots=True, kw_only=True)
class GoalFailed(Ending):
    STATUS, VERB = FAILED, "failed"
    STYLE = Style("goal", colour="bold-red", marker="failure")

    reason: str


@event_kind("goal.blocked")
@dataclass(frozen=True, slots=True, kw_only=True)
class GoalBlocked(Ending):
    STATUS, VERB = BLOCKED, "blocked"
    STYLE = Style("goal", colour="bold-red", marker="failure")

    reason: str
    # READY_UNCLAIMED: the goal keeps the due wake the block ends
    # (``unclaimed``), so that a clock stepped back can withdraw a block
    # judged while it ran ahead (ledger.domain.clocksteps). A flag, not the
    # wake: the state has it. Blocks recorded before it keep nothing.
    keeps_ready: bool | None = optional()

    def fold(self, state: GoalState, at: datetime) -> Changes:
        changes = Ending.fold(self, state, at)
        if self.keeps_ready and state.ready is not None:
            changes["unclaimed"] = state.ready.but(at=at, since=None)
        return changes


def _evidence(items: object, limit: int = 5) -> str:
    """The acceptance evidence of a completion, one ``criterion ⇒ evidence`` per
    done criterion (none for a goal without done criteria)."""
    items = [i for i in items if isinstance(i, Mapping)] if isinstance(items, list) else []
    if not items:
        return ""
    more = f" (+{len(items) - limit})" if len(items) > limit else ""
    return " · evidence: " + "; ".join(
        f"“{clean(i.get('criterion', '?'), 60)}” ⇒ {clean(i.get('evidence', ''), 100)}"
        for i in items[:limit]) + more
