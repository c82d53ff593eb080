"""Event kinds (``family.past_tense``) and the event value the decider emits.

A stored kind never changes meaning and its data never changes shape without
an upcaster: old events are replayed forever.
"""

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

GOAL_STARTED = "goal.started"
GOAL_FINISH_REQUESTED = "goal.finish_requested"
GOAL_PAUSED = "goal.paused"
GOAL_STOPPED = "goal.stopped"
GOAL_RECOVERED = "goal.recovered"
RUN_REPORTED = "run.reported"
CONTINUATION_CHARGED = "continuation.charged"
APPROVAL_REQUESTED = "approval.requested"
APPROVAL_RESOLVED = "approval.resolved"
WORKSPACE_BOUND = "workspace.bound"
WORKSPACE_RELEASED = "workspace.released"
LEASE_ACQUIRED = "lease.acquired"
LEASE_TAKEN_OVER = "lease.taken_over"
LEASE_RENEWED = "lease.renewed"
LEASE_RELEASED = "lease.released"
LEASE_EXPIRED = "lease.expired"
GOAL_COMPLETED = "goal.completed"
GOAL_FAILED = "goal.failed"
GOAL_BLOCKED = "goal.blocked"
CHECKPOINT_RECORDED = "checkpoint.recorded"

WAKE_SCHEDULED = "wake.scheduled"
WAKE_CANCEL_REQUESTED = "wake.cancel_requested"
CONTINUATION_DISPATCHED = "continuation.dispatched"
JOB_TRACKED = "job.tracked"
JOB_UPDATED = "job.updated"
# A deadline passed without its evidence (DESIGN section 6): HOST_SILENT or
# JOB_SILENT, with what was expected and by when.
LIVENESS_MISSED = "liveness.missed"

# Kinds that may still be appended to a terminal goal: a late wake is answered
# (terminal_noop / terminal_cleanup_required, DESIGN section 6), the
# watchdog's cancellation receipt is recorded, and an operator may recover a
# failed/AUTH_FAILED goal (rule 11). Nothing else.
WAKE_CLAIMED = "wake.claimed"
RECEIPT_RECORDED = "receipt.recorded"
# A dispatch's outcome is recorded even when the continuation it started
# finished the goal first (found by the soak: the record was refused).
TERMINAL_ALLOWED_KINDS = frozenset({WAKE_CLAIMED, RECEIPT_RECORDED, GOAL_RECOVERED,
                                    CONTINUATION_DISPATCHED})


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    data: Mapping[str, Any]
    at: datetime

    @property
    def family(self) -> str:
        return self.kind.partition(".")[0]


def iso(moment: datetime) -> str:
    """UTC, microseconds, always the same shape: it is hashed into the chain."""
    last = _last_iso
    if last[0] is moment:
        # A command's events share one "now", formatted for each event's
        # time, its hash and the projection's updated_at: once is enough.
        return last[1]
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("the ledger only records aware datetimes")
    utc = moment.astimezone(UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if utc.year < 1000:
        # glibc's %Y drops leading zeros ("1-01-01…"), which fromisoformat
        # refuses: pad by hand so that every instant read back parses. (Years
        # from 1000 on, everything ever hashed, are formatted as before.)
        text = f"{utc.year:04d}{text[text.index('-'):]}"
    _remember_iso(moment, text)
    return text


def _remember_iso(moment: datetime, text: str) -> None:
    global _last_iso
    _last_iso = (moment, text)  # one tuple: a thread reads the old pair or the new


_last_iso: tuple[datetime | None, str] = (None, "")


# ---------------------------------------------------------------- typed payloads


@dataclass(frozen=True, slots=True)
class WakeClaimed:
    """The data of a ``wake.claimed`` event, built in one place for every path
    that records one (``ledger.domain.claims``: a claim, settle's unblocked
    host goal, a job that ended on a host goal). The optional fields are
    recorded only when set."""

    occurrence_id: str
    source: str  # internal | host | operator
    kind: str  # one of WAKE_KINDS
    outcome: str
    reason: str  # one of WAKE_REASONS
    notes: str
    slot: str | None = None  # the recurring slot it belongs to (ISO)
    next_due_at: str | None = None  # the watchdog's next slot, when it moves
    operator: str | None = None  # an operator's wake: who
    why: str | None = None  # and why
    retry_count: int | None = None  # granted: wakes since the last checkpoint (rule 7)
    retry_after_seconds: int | None = None
    charge: bool | None = None  # ready_for_pull: a recovery continuation (rule 5)

    def to_data(self) -> dict[str, Any]:
        return {f.name: value for f in fields(self)
                if (value := getattr(self, f.name)) is not None}

    def event(self, now: datetime) -> Event:
        return Event(WAKE_CLAIMED, self.to_data(), now)
