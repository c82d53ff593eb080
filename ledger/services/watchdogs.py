"""The goal's one watchdog: ensure it, cancel it, record what the host did
with it — and the answer's guidance: the next required action, the schedule
a host must create, the cleanup after a cancel."""

import uuid
from dataclasses import dataclass
from typing import Any

from ledger.domain import GoalState, LeaseProof
from ledger.domain.finishing import completion_state
from ledger.domain.parts import iso_text
from ledger.domain.policy import interval_minutes
from ledger.domain.watchdogs import HOST, CancelWatchdog, PrepareWatchdog, RecordReceipt
from ledger.services.bodies import watchdog_body
from ledger.services.caller import Caller, run, state_of

# What the agent does next, by the watchdog's status.
_NEXT = {
    "requested": "create_the_host_schedule_and_record_a_receipt",
    "uncertain": "reconcile_with_the_host_then_record_a_receipt",
    "cancel_requested": "delete_the_host_schedule_and_record_a_receipt",
}


@dataclass(frozen=True)
class WatchdogAnswer:
    """The watchdog as shown, and what its host (the agent's) must do now."""

    state: GoalState
    api_url: str
    receipt: bool = False  # a receipt's answer also says where completion stands

    def as_dict(self) -> dict[str, Any]:
        state, watchdog = self.state, self.state.watchdog
        status = state.watchdog_status
        action = (("retry_the_create_once" if watchdog and watchdog.retry_allowed else None)
                  if status == "create_failed" else _NEXT.get(status))
        answer: dict[str, Any] = {"watchdog": watchdog_body(state), "next_required_action": action}
        if (watchdog is not None and watchdog.backend == HOST
                and status in ("requested", "create_failed")):
            answer["host_schedule"] = {
                "occurrence": "interval",
                "interval_minutes": interval_minutes(watchdog.interval_seconds),
                "interval_seconds": watchdog.interval_seconds,
                "tzid": watchdog.tzid,
                "first_due_at": iso_text(watchdog.first_due_at),
                "destination": {"method": "POST",
                                "url": f"{self.api_url}/goals/{state.goal_id}/claim",
                                "body": {"occurrence_id": "<the host run's id>"}},
            }
        if status == "cancel_requested":
            answer["cleanup"] = {"delete": "the host schedule created for this goal",
                                 "then": f"POST /api/v1/goals/{state.goal_id}/watchdog/receipts "
                                         "with status cancelled (or user_attested_deleted)"}
        if self.receipt:
            answer["completion_state"] = completion_state(state)
        return answer


def ensure(caller: Caller, goal_id: str | uuid.UUID, proof: LeaseProof | None, *, tzid: str,
           api_url: str) -> WatchdogAnswer:
    """The goal's one watchdog, in the caller's zone (else the session's)."""
    zone = state_of(caller, goal_id).zone(tzid)
    state = run(caller, goal_id, PrepareWatchdog(proof, 0, zone)).state
    return WatchdogAnswer(state, api_url)


def cancel(caller: Caller, goal_id: str | uuid.UUID, proof: LeaseProof | None, *,
           api_url: str) -> WatchdogAnswer:
    return WatchdogAnswer(run(caller, goal_id, CancelWatchdog(proof)).state, api_url)


def receipt(caller: Caller, goal_id: str | uuid.UUID, proof: LeaseProof | None, *, status: str,
            host_ref_sha256: str, due_at: str, runs_on: str, verified: bool, attested_by: str,
            note: str, api_url: str) -> WatchdogAnswer:
    """What the host did with the watchdog (its task id as a digest only)."""
    command = RecordReceipt(proof, status, host_ref_sha256, due_at, runs_on, verified,
                            attested_by, note)
    return WatchdogAnswer(run(caller, goal_id, command).state, api_url, receipt=True)
