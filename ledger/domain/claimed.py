"""A wake's claim (``wake.claimed``): what it records, the outcomes it may
answer, and how it folds into the goal's state: the occurrence remembered,
the watchdog's next slot, the pause or readiness it ends, and a host's own
fire as the anchor of its slots. Which outcome a claim answers is decided in
``ledger.domain.claims``."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledger.domain.codec import Payload, event_kind, optional
from ledger.domain.events import Changes, Event, Style
from ledger.domain.parts import Continued, LastWake, Ready
from ledger.domain.state import LONG_PAUSE, PAUSED, WAITING, GoalState
from ledger.domain.text import clean, known
from ledger.domain.watchdogs import HOST, host_heard

CLAIM_MEMORY = 64  # occurrence ids remembered for already_claimed
# A wake that found its reset continued already (or its continuation
# refused by policy or budget): answered, no work done.
STOOD_DOWN = "stood_down"

# Outcomes that use up their occurrence: a later fire of the same one is
# already_claimed. worker_busy_noop and not_due consume nothing, so the same
# occurrence may be claimed again after retry_after_seconds.
CONSUMING = frozenset({"recurring_acquired", "ready_for_pull", "terminal_cleanup_required",
                       # A reset continued already (stood_down), or handed to a
                       # person (approval_required): this wake is answered.
                       STOOD_DOWN, "approval_required"})
# Outcomes that resume the goal (a lease granted, or ready for its agent to take).
GRANTED = frozenset({"recurring_acquired", "ready_for_pull"})


@event_kind("wake.claimed")
@dataclass(frozen=True, slots=True, kw_only=True)
class WakeClaimed(Payload):
    """A wake's claim, built in one place for every path that records one
    (``ledger.domain.claims``: a claim, settle's unblocked host goal, a job
    that ended on a host goal). The optional fields are recorded only when set."""

    STYLE = Style("wake", marker="wake")

    occurrence_id: str
    source: str  # internal | host | operator
    kind: str  # one of claims.WAKE_KINDS
    outcome: str
    reason: str  # one of claims.WAKE_REASONS
    notes: str
    slot: str | None = optional()  # the recurring slot it belongs to (ISO)
    next_due_at: str | None = optional()  # the watchdog's next slot, when it moves
    operator: str | None = optional()  # an operator's wake: who
    why: str | None = optional()  # and why
    # granted: wakes since the last checkpoint (the wake-loop bound)
    retry_count: int | None = optional()
    retry_after_seconds: int | None = optional()
    # ready_for_pull: a recovery continuation (the continuation budget)
    charge: bool | None = optional()
    early: bool | None = optional()  # a host fire before its slot: claims no slot
    anchor: str | None = optional()  # a host fire that re-anchored the slots here (ISO)

    def event(self, now: datetime) -> Event:
        return Event(self, now)

    def fold(self, state: GoalState, at: datetime) -> Changes:
        outcome = self.outcome
        changes: Changes = {
            "last_wake": LastWake(occurrence_id=self.occurrence_id, outcome=outcome,
                                  reason=self.reason, at=at),
        }
        if outcome in CONSUMING:
            changes["claimed"] = [*state.claimed, self.occurrence_id][-CLAIM_MEMORY:]
        watchdog = state.watchdog
        if watchdog is not None:
            # A wake fired: its row works. Its repairs count from none again.
            moved = {"next_due_at": datetime.fromisoformat(self.next_due_at)} \
                if self.next_due_at else {}
            if watchdog.repairs is not None:
                moved["repairs"] = None
            if self.source == HOST:
                moved.update(_host_fire(self, at))
            if moved:
                changes["watchdog"] = watchdog.but(**moved)
        # And a WAKE_NOT_FIRING listing is answered.
        if state.alert_reason == "WAKE_NOT_FIRING":
            changes["liveness_alert"] = None
        if self.retry_count is not None:
            changes["retry_count"] = self.retry_count
        if outcome == "recurring_acquired" and state.paused_until:
            # The reset's one continuation (its lease, granted next, is the
            # following generation): a later one stands down against it.
            changes["continued"] = Continued(reset=state.paused_until, by="wake", at=at,
                                             generation=state.lease_generation + 1)
        if outcome in GRANTED:
            # The wake is what the pause waited for; a requested or reset wake is
            # used up by whichever wake resumed the goal.
            changes.update(paused_until=None, reset_wake=None, requested_wake=None)
            if state.status == PAUSED:
                changes.update(status=WAITING, reason="")  # RATE_LIMITED ends with the pause
            if state.alert_reason == LONG_PAUSE:
                changes["liveness_alert"] = None  # and its listing for a person
        if outcome == "ready_for_pull":
            # ``since``: when the goal first became ready, kept across the further
            # slots that find it still unpulled (its READY_UNCLAIMED deadline).
            ready = state.ready
            # The reset whose one continuation the pull will be.
            reset = state.paused_until or (ready.reset if ready is not None else None)
            changes["ready"] = Ready(occurrence_id=self.occurrence_id, reason=self.reason,
                                     at=at, since=ready.first_at if ready is not None else at,
                                     charge=self.charge or False, reset=reset)
        if self.source == HOST and not self.early:
            # An early fire proves a host, not that it claims its slots: it
            # leaves HOST_SILENT standing (else each would flip the listing).
            changes.update(host_heard(state))
        return changes

    def line(self) -> str:
        text = f"{known(self.outcome)} ({self.reason or '?'}), {known(self.source)}"
        if self.retry_after_seconds is not None:
            text += f", retry in {known(self.retry_after_seconds)} s"
        if self.outcome in GRANTED and self.retry_count is not None:
            text += f", wake {known(self.retry_count)} since the last checkpoint"
        if self.operator:
            text += f", by {clean(known(self.operator))} ({clean(self.why or '', 60)})"
        return text + (f": {clean(known(self.notes), 90)}" if self.notes else "")


def _host_fire(data: "WakeClaimed", at: datetime) -> dict[str, Any]:
    """A host fire on the watchdog: an early one is remembered (``reanchor``
    compares the next with it), any other forgets it; a re-anchoring one
    moves the anchor to the host's own slot."""
    changed: dict[str, Any] = {"early_fire": at if data.early else None}
    if data.anchor:
        changed["anchor"] = datetime.fromisoformat(data.anchor)
    return changed
