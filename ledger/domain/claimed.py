"""How a wake's claim folds into the goal's state (``wake.claimed``'s evolver):
the occurrence remembered, the watchdog's next slot, the pause or readiness it
ends, and a host's own fire as the anchor of its slots."""

from typing import Any

from ledger.domain.claims import CLAIM_MEMORY, CONSUMING, GRANTED
from ledger.domain.events import WakeClaimed
from ledger.domain.state import LONG_PAUSE, PAUSED, WAITING, GoalState
from ledger.domain.watchdogs import HOST, host_heard


def claimed(state: GoalState, data: WakeClaimed, at: str) -> dict[str, Any]:
    outcome = data.outcome
    changes: dict[str, Any] = {
        "last_wake": {"occurrence_id": data.occurrence_id, "outcome": outcome,
                      "reason": data.reason, "at": at},
    }
    if outcome in CONSUMING:
        changes["claimed"] = [*state.claimed, data.occurrence_id][-CLAIM_MEMORY:]
    if state.watchdog and data.next_due_at:
        changes["watchdog"] = {**state.watchdog, "next_due_at": data.next_due_at}
    # A wake fired: its row works. Its repairs count from none again, and a
    # WAKE_NOT_FIRING listing is answered.
    if "repairs" in changes.get("watchdog", state.watchdog):
        changes["watchdog"] = {k: v for k, v in changes.get("watchdog", state.watchdog).items()
                               if k != "repairs"}
    if state.liveness_alert.get("reason") == "WAKE_NOT_FIRING":
        changes["liveness_alert"] = {}
    if data.retry_count is not None:
        changes["retry_count"] = data.retry_count
    if outcome == "recurring_acquired" and state.paused_until:
        # The reset's one continuation (its lease, granted next, is the
        # following generation): a later one stands down against it.
        changes["continued"] = {"reset": state.paused_until, "by": "wake", "at": at,
                                "generation": state.lease_generation + 1}
    if outcome in GRANTED:
        # The wake is what the pause waited for; a requested or reset wake is
        # used up by whichever wake resumed the goal.
        changes.update(paused_until="", reset_wake={}, requested_wake={})
        if state.status == PAUSED:
            changes.update(status=WAITING, reason="")  # RATE_LIMITED ends with the pause
        if state.liveness_alert.get("reason") == LONG_PAUSE:
            changes["liveness_alert"] = {}  # and its listing for a person
    if outcome == "ready_for_pull":
        # ``since``: when the goal first became ready, kept across the further
        # slots that find it still unpulled (its READY_UNCLAIMED deadline).
        changes["ready"] = {"occurrence_id": data.occurrence_id, "reason": data.reason,
                            "at": at, "since": state.ready.get("since", at) if state.ready
                            else at, "charge": data.charge or False}
        reset = state.paused_until or state.ready.get("reset")
        if reset:  # the reset whose one continuation the pull will be
            changes["ready"]["reset"] = reset
    if data.source == HOST and state.watchdog:
        changes["watchdog"] = _host_fire(changes.get("watchdog", state.watchdog), data, at)
    if data.source == HOST and not data.early:
        # An early fire proves a host, not that it claims its slots: it
        # leaves HOST_SILENT standing (else each would flip the listing).
        changes.update(host_heard(state))
    return changes


def _host_fire(watchdog: dict[str, Any], data: WakeClaimed, at: str) -> dict[str, Any]:
    """A host fire on the watchdog: an early one is remembered (``reanchor``
    compares the next with it), any other forgets it; a re-anchoring one
    moves the anchor to the host's own slot."""
    changed = {k: v for k, v in watchdog.items() if k != "early_fire"}
    if data.early:
        changed["early_fire"] = at
    if data.anchor:
        changed["anchor"] = data.anchor
    return changed
