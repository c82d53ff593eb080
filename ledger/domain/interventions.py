"""What a person does to a goal, as recorded: an approval gate asked for and
resolved, a stop, a recovery (the approval-gate rule, the operators' rule).
The commands that decide them are ``ledger.domain.runs`` (and
``continuations`` for the resume gate); here are the kinds and how they fold.
"""

from dataclasses import dataclass
from datetime import datetime

from ledger.domain.codec import Payload, event_kind, optional
from ledger.domain.events import Changes, Style, iso
from ledger.domain.resume import RESUME_GATE
from ledger.domain.state import BLOCKED, LONG_PAUSE, WAITING, GoalState
from ledger.domain.text import clean, known

# Alerts on a goal that is not blocked (docs/design.md, "Wakes and claims"): recover clears
# them; JOB_SILENT's jobs are written off (cancelled), so the goal may finish.
# NO_PROGRESS and WAKE_NOT_FIRING likewise: a recover says "a human
# looked" and restarts the goal's progress clock.
SILENCES = frozenset({"HOST_SILENT", "JOB_SILENT", "NO_PROGRESS", "WAKE_NOT_FIRING",
                      # A host continued against the resume policy: a person
                      # looked (ledger.domain.continuations).
                      "CONTINUED_AGAINST_POLICY",
                      # A person read a long pause and chose to wait: listed
                      # again if it still lasts another long_pause_minutes.
                      LONG_PAUSE})


@event_kind("approval.requested")
@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequested(Payload):
    CHANGES_LEASE = True
    STYLE = Style("approval")

    gate: str
    generation: int
    summary: str

    def fold(self, state: GoalState, at: datetime) -> Changes:
        gate = {"gate": self.gate, "summary": self.summary, "requested_at": iso(at)}
        return {"status": BLOCKED, "reason": "BLOCKED_APPROVAL", "lease": None,
                "lease_end": "released" if state.lease is not None else state.lease_end,
                "pending_approvals": [*state.pending_approvals, gate]}

    def line(self) -> str:
        return (f"gate {clean(known(self.gate))}"
                + (f": {clean(known(self.summary), 100)}" if self.summary else ""))


@event_kind("approval.resolved")
@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalResolved(Payload):
    STYLE = Style("approval")

    gate: str
    decision: str  # approve | reject
    operator: str
    note: str

    def fold(self, state: GoalState, at: datetime) -> Changes:
        pending = [g for g in state.pending_approvals if g["gate"] != self.gate]
        changes: Changes = {"pending_approvals": pending}
        if self.decision == "approve" and not pending:
            changes.update(status=WAITING, reason="", retry_count=0, progress_since=at,
                           since_progress={})
        if self.decision == "approve" and self.gate == RESUME_GATE:
            changes["resume_approved"] = state.paused_until  # this reset may be continued
        return changes

    def line(self) -> str:
        verb = "approved" if self.decision == "approve" else "rejected"
        note = f": {clean(known(self.note), 80)}" if self.note else ""
        return f"gate {clean(known(self.gate))} {verb} by {clean(known(self.operator))}{note}"


@event_kind("goal.stopped")
@dataclass(frozen=True, slots=True, kw_only=True)
class GoalStopped(Payload):
    CHANGES_LEASE = True
    STYLE = Style("goal", colour="red")

    operator: str
    reason: str
    summary: str

    def fold(self, state: GoalState, at: datetime) -> Changes:
        return {"status": "stopped", "reason": "", "summary": self.summary, "lease": None,
                "finish_requested": {}}

    def line(self) -> str:
        return f"stopped by {clean(known(self.operator))}: {clean(known(self.reason), 100)}"


@event_kind("goal.recovered")
@dataclass(frozen=True, slots=True, kw_only=True)
class GoalRecovered(Payload):
    STYLE = Style("goal")

    operator: str
    reason: str
    from_status: str
    from_reason: str
    written_off_jobs: list[str] | None = optional()  # a silence's running jobs

    def fold(self, state: GoalState, at: datetime) -> Changes:
        if self.from_reason == LONG_PAUSE:
            # The pause goes on; its listing clock starts again (the progress
            # clock already starts at the reset).
            return {"liveness_alert": None, "paused_at": at}
        if self.from_reason in SILENCES:
            # The goal was never stopped: it keeps its status and lease.
            written_off = set(self.written_off_jobs or ())
            jobs = [{**job, "status": "cancelled", "conclusion": "written off by an operator",
                     "updated_at": iso(at)} if job["job_id"] in written_off else job
                    for job in state.jobs]
            return {"liveness_alert": None, "jobs": jobs, "progress_since": at,
                    "since_progress": {}}
        # The operators' rule: a recovered goal starts a new continuation budget.
        return {"status": WAITING, "reason": "", "continuations_used": 0, "retry_count": 0,
                "rate_limits": 0, "paused_until": None, "lease": None, "liveness_alert": None,
                "progress_since": at, "since_progress": {}}

    def line(self) -> str:
        return (f"recovered by {clean(known(self.operator))} from {known(self.from_status)}/"
                f"{self.from_reason or '-'}: {clean(known(self.reason), 80)}")
