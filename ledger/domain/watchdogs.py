"""Watchdogs (one watchdog per goal; docs/design.md, "Wakes and claims"): prepare,
cancel, receipts, statuses.

One watchdog per goal (a recurring wake), owned by the server (``internal``,
a django-q2 schedule) or by the agent's host (``host``, confirmed by
receipts). It is never retimed and never doubled; a goal may complete only
once it is cancelled (``ledger.domain.finishing``). The kinds
``wake.scheduled``, ``receipt.recorded`` and ``wake.cancel_requested`` are here.
"""

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from ledger.domain import validation
from ledger.domain.codec import Payload, event_kind, optional
from ledger.domain.commands import LeaseProof
from ledger.domain.errors import DomainError, InvalidCommand
from ledger.domain.events import Changes, Event, Style, iso
from ledger.domain.leases import fence
from ledger.domain.parts import OneOffWake, Watchdog
from ledger.domain.policy import timezone
from ledger.domain.state import GoalState
from ledger.domain.text import clean, known, short

INTERNAL, HOST, OPERATOR = "internal", "host", "operator"
RECEIPT_STATUSES = ("created", "create_failed", "create_uncertain", "cancelled", "disabled",
                    "user_attested_deleted")
RUNS_ON = ("cloud", "local", "unverified")

# Watchdog statuses after which something may still exist on a scheduler and
# must be cancelled (with a receipt) before a goal may complete.
LIVE = frozenset({"requested", "live", "uncertain", "disabled", "cancel_requested"})
DEGRADED = frozenset({"create_failed", "uncertain", "disabled", "failed"})


@dataclass(frozen=True, slots=True)
class PrepareWatchdog:
    proof: LeaseProof | None
    interval_seconds: int = 0  # 0: the goal's own (policy.interval_seconds)
    tzid: str = "UTC"
    schedule_name: str = ""  # internal: the django-q2 schedule's name


@dataclass(frozen=True, slots=True)
class CancelWatchdog:
    proof: LeaseProof | None


@dataclass(frozen=True, slots=True)
class RecordReceipt:
    """What the agent's host did with the watchdog (host backend only)."""

    proof: LeaseProof | None
    status: str
    host_ref_sha256: str = ""
    due_at: str = ""
    runs_on: str = "unverified"
    verified: bool = False  # the host proved where the task runs
    attested_by: str = ""
    note: str = ""


def watchdog_live(state: GoalState) -> bool:
    return state.watchdog_status in LIVE


def watchdog_health(state: GoalState) -> str:
    status = state.watchdog_status
    if not status:
        return "none"
    return "degraded" if status in DEGRADED else "ok"


def _due(moment: datetime, seconds: int) -> str:
    return iso(moment + timedelta(seconds=seconds))


# The django-q2 schedule rows of a goal's wakes, named after it: one of each
# (the recurring watchdog, a rate limit's reset, a requested one-off wake).
# The doctor finds a row's goal by these prefixes: named once, here.
SCHEDULE_PREFIXES = ("wakeledger-watchdog-", "wakeledger-reset-", "wakeledger-wake-")
_WATCHDOG, _RESET, _REQUESTED = SCHEDULE_PREFIXES


def schedule_name(goal_id: str) -> str:
    return f"{_WATCHDOG}{goal_id}"


def reset_schedule_name(goal_id: str) -> str:
    return f"{_RESET}{goal_id}"


def requested_schedule_name(goal_id: str) -> str:
    return f"{_REQUESTED}{goal_id}"


def schedule_goal(name: str) -> str:
    """The goal a wake's schedule row is named after ("" for another row)."""
    return next((name[len(p):] for p in SCHEDULE_PREFIXES if name.startswith(p)), "")


# ---------------------------------------------------------------- watchdog


def prepare(state: GoalState, cmd: PrepareWatchdog, now: datetime) -> list[Event]:
    fence(state, cmd.proof)
    backend = state.setting("scheduler")
    seconds = cmd.interval_seconds or state.interval_seconds
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
        raise InvalidCommand("interval_seconds must be a positive whole number")
    tzid = timezone(cmd.tzid or "UTC", "tzid")
    status = state.watchdog_status
    retry = False
    if status in ("requested", "live", "uncertain", "disabled", "cancel_requested", "failed"):
        # One watchdog per goal: never a second watchdog, never retimed. An uncertain create
        # is reconciled by a receipt, never followed by a blind second create.
        return []
    if status == "create_failed":
        if state.watchdog is None or not state.watchdog.retry_allowed:
            return []
        retry = True  # a definitive failure allows exactly one retry of the same create
    scheduled = WakeScheduled(backend=backend, interval_seconds=seconds, tzid=tzid,
                              first_due_at=_due(now, seconds), attempt=2 if retry else 1)
    if backend == INTERNAL:
        name = validation.text(cmd.schedule_name or schedule_name(state.goal_id), "schedule_name",
                               limit=200, required=True)
        return [Event(replace(scheduled, schedule_name=name), now),
                Event(ReceiptRecorded(backend=INTERNAL, status="created", schedule_name=name,
                                      due_at=scheduled.first_due_at), now)]
    return [Event(scheduled, now)]


def cancel(state: GoalState, cmd: CancelWatchdog, now: datetime) -> list[Event]:
    fence(state, cmd.proof)
    return cancel_events(state, now, why="cancelled by the agent")


def cancel_events(state: GoalState, now: datetime, *, why: str) -> list[Event]:
    watchdog = state.watchdog
    if watchdog is None or watchdog.status not in LIVE:
        return []
    status = watchdog.status
    if watchdog.backend == INTERNAL:
        # The server cancels its own schedule in the same transaction.
        return [Event(ReceiptRecorded(backend=INTERNAL, status="cancelled",
                                      schedule_name=watchdog.schedule_name, note=why),
                      now)]
    if status == "cancel_requested":
        return []
    return [Event(WakeCancelRequested(backend=HOST, note=why), now)]


def receipt(state: GoalState, cmd: RecordReceipt, now: datetime) -> list[Event]:
    """The receipt alone (``finishing.receipt`` also completes a finish waiting for it)."""
    # On a terminal goal the lease is gone; the cancellation receipt of its
    # leftover host watchdog is still welcome (and needed).
    if not state.terminal:
        fence(state, cmd.proof)
    if state.watchdog is None or state.watchdog.backend != HOST:
        raise DomainError("only a host watchdog takes receipts; internal watchdogs record "
                          "their own", code="validation_error", field="status")
    if cmd.status not in RECEIPT_STATUSES:
        raise InvalidCommand(f"status must be one of {', '.join(RECEIPT_STATUSES)}",
                             field="status")
    if state.terminal and cmd.status not in ("cancelled", "user_attested_deleted", "disabled"):
        raise DomainError(f"the goal is {state.status}; only a cancellation receipt is taken",
                          code="goal_terminal")
    data: dict[str, Any] = {"backend": HOST, "status": cmd.status,
                            "note": validation.text(cmd.note, "note", limit=validation.MAX_NOTE)}
    if cmd.status == "created":
        data["host_ref_sha256"] = validation.sha256(cmd.host_ref_sha256, "host_ref")
        data["due_at"] = validation.instant(cmd.due_at, "due_at")
        _near_slot(state, datetime.fromisoformat(data["due_at"]), now)
        if cmd.runs_on not in RUNS_ON:
            raise InvalidCommand(f"runs_on must be one of {', '.join(RUNS_ON)}",
                                 field="runs_on")
        if cmd.runs_on == "cloud" and not cmd.verified:
            raise InvalidCommand("runs_on may be cloud only when the host proved it "
                                 "(verified: true)", field="runs_on")
        data["runs_on"] = cmd.runs_on
    if cmd.status == "user_attested_deleted":
        data["attested_by"] = validation.text(cmd.attested_by, "attested_by",
                                              limit=validation.MAX_KEY, required=True)
    if cmd.status == "create_failed":
        data["retry_allowed"] = state.watchdog.attempt == 1
    return [Event(ReceiptRecorded(**data), now)]


RECEIPT_DUE_AT_MISMATCH = "receipt_due_at_mismatch"


def _near_slot(state: GoalState, due: datetime, now: datetime) -> None:
    """A host receipt's ``due_at`` becomes the anchor every later
    slot and the HOST_SILENT deadline are counted from, so a typo, a time-zone
    slip or a year-ahead date would hide a dead host until then. It must lie
    within one interval plus the host's lateness (half an interval) of the slot
    the server prepared — or, for a receipt recorded long after the prepare
    (a reconciled uncertain create), of the host's next run from now."""
    every = timedelta(seconds=state.interval_seconds)
    tolerance = every + every / 2
    watchdog = state.watchdog
    prepared = (watchdog.next_due_at or watchdog.first_due_at) if watchdog is not None else None
    slot = prepared or now + every
    if abs(due - slot) <= tolerance or now - every / 2 <= due <= now + tolerance:
        return
    raise DomainError(
        f"due_at {iso(due)} is too far from the slot this server prepared ({iso(slot)}): "
        f"a host task with a {int(every.total_seconds() // 60)}-minute interval runs within "
        f"{iso(slot - tolerance)} .. {iso(slot + tolerance)}; send the task's real next run "
        "time (with its offset)", field="due_at", code=RECEIPT_DUE_AT_MISMATCH,
        expected_due_at=iso(slot))


def arm_events(state: GoalState, interval: int, first_due_at: str, now: datetime) -> list[Event]:
    name = schedule_name(state.goal_id)
    return [Event(WakeScheduled(backend=INTERNAL, interval_seconds=interval,
                                tzid=state.zone(state.watchdog.tzid if state.watchdog else ""),
                                first_due_at=first_due_at, attempt=1, schedule_name=name), now),
            Event(ReceiptRecorded(backend=INTERNAL, status="created", schedule_name=name,
                                  due_at=first_due_at), now)]



# ---------------------------------------------------------------- what the kinds below share


def repaired(state: GoalState, data: "WakeScheduled | ReceiptRecorded",
             at: datetime) -> dict[str, Any]:
    """What a repair event adds to its wake: a fresh lateness window and the
    count of repairs since the wake last fired (``attempt``)."""
    if data.repair is None:
        return {}
    return {"repaired_at": at, "repairs": data.attempt}


def unlisted_by_repair(state: GoalState,
                       data: "WakeScheduled | ReceiptRecorded") -> dict[str, Any]:
    """A repair while WAKE_NOT_FIRING stands is an operator's (the automatic
    one stops): the goal is off the list until the bound is reached again."""
    if data.repair is not None and state.alert_reason == "WAKE_NOT_FIRING":
        return {"liveness_alert": None}
    return {}


_RECEIPT_STATUS = {"created": "live", "create_failed": "create_failed",
                   "create_uncertain": "uncertain", "cancelled": "cancelled",
                   "disabled": "disabled", "user_attested_deleted": "cancelled"}


def host_heard(state: GoalState) -> dict[str, Any]:
    """Evidence from the host (a claim, a receipt, a new watchdog) ends HOST_SILENT."""
    if state.alert_reason == "HOST_SILENT":
        return {"liveness_alert": None}
    return {}


# ---------------------------------------------------------------- the watchdog kinds


@event_kind("wake.scheduled")
@dataclass(frozen=True, slots=True, kw_only=True)
class WakeScheduled(Payload):
    """A watchdog prepared (no ``kind``), or a one-off wake (``kind`` reset or
    requested); a repair (``repair``) recreates a wake's schedule row."""

    STYLE = Style("wake")

    backend: str | None = optional()  # the watchdog's
    interval_seconds: int | None = optional()
    tzid: str | None = optional()
    first_due_at: str | None = optional()
    # A watchdog's create attempt (1, or 2 for the one retry); a repair's count
    # since the wake last fired (older repairs, which had none, count one).
    attempt: int | None = optional()
    schedule_name: str | None = optional()  # internal only
    kind: str | None = optional()  # reset | requested (a one-off wake)
    due_at: str | None = optional()
    reason: str | None = optional()  # requested: why
    requested_by: str | None = optional()
    replaces: str | None = optional()  # the pending requested wake's due time
    repair: str | None = optional()  # missing | exhausted | late

    @property
    def one_off(self) -> bool:
        return self.kind in ("reset", "requested")

    def fold(self, state: GoalState, at: datetime) -> Changes:
        # A repaired row gets the scheduler's lateness anew (liveness deadlines).
        repair = repaired(state, self, at)
        if self.kind == "reset":  # the one-off wake at a rate-limit reset
            return {"reset_wake": OneOffWake(due_at=datetime.fromisoformat(str(self.due_at)),
                                             schedule_name=self.schedule_name, **repair),
                    **unlisted_by_repair(state, self)}
        if self.kind == "requested":  # the one-off wake the agent asked for
            # A host goal's has no schedule row: its host creates the wake.
            return {"requested_wake": OneOffWake(
                        due_at=datetime.fromisoformat(str(self.due_at)), reason=self.reason,
                        schedule_name=self.schedule_name or "", **repair),
                    **unlisted_by_repair(state, self)}
        first = datetime.fromisoformat(self.first_due_at) if self.first_due_at else None
        watchdog = Watchdog(
            backend=str(self.backend), interval_seconds=int(self.interval_seconds or 0),
            tzid=str(self.tzid), status="requested", attempt=int(self.attempt or 1),
            first_due_at=first,
            # Slots are anchor + k x interval; no claim ever moves the anchor.
            anchor=first, next_due_at=first, retry_allowed=False,
            schedule_name=self.schedule_name)
        return {"watchdog": watchdog, **host_heard(state)}

    def line(self) -> str:
        if self.kind == "reset":
            return f"one-off wake at the reset, {short(self.due_at)}"
        if self.kind == "requested":
            replaces = f" (replaces {short(self.replaces)})" if self.replaces else ""
            return (f"one-off wake asked for ({self.reason or '?'}), "
                    f"{short(self.due_at)}{replaces}")
        seconds = self.interval_seconds or 0
        minutes = round(seconds / 60, 1)
        every = f"{minutes:g} min" if minutes >= 1 else f"{known(self.interval_seconds)} s"
        retry = " (retry)" if (self.attempt or 1) > 1 else ""
        return (f"{self.backend or '?'} watchdog every {every}{retry}, first due "
                f"{short(self.first_due_at)}")


@event_kind("wake.cancel_requested")
@dataclass(frozen=True, slots=True, kw_only=True)
class WakeCancelRequested(Payload):
    STYLE = Style("wake")

    backend: str
    note: str

    def fold(self, state: GoalState, at: datetime) -> Changes:
        if state.watchdog is None:
            return {}  # nothing was prepared: nothing to cancel
        return {"watchdog": state.watchdog.but(status="cancel_requested")}

    def line(self) -> str:
        return (f"{known(self.backend)} watchdog cancellation requested: "
                f"{clean(known(self.note), 80)}")


@event_kind("receipt.recorded")
@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiptRecorded(Payload):
    STYLE = Style("receipt")

    backend: str  # internal | host
    status: str  # one of RECEIPT_STATUSES
    schedule_name: str | None = optional()  # internal
    due_at: str | None = optional()
    note: str | None = optional()
    host_ref_sha256: str | None = optional()  # host, created
    runs_on: str | None = optional()
    attested_by: str | None = optional()  # user_attested_deleted
    retry_allowed: bool | None = optional()  # create_failed
    repair: str | None = optional()  # missing | exhausted | late | orphaned
    attempt: int | None = optional()  # a repair's count since the wake last fired

    def fold(self, state: GoalState, at: datetime) -> Changes:
        if self.repair == "orphaned":
            return {}  # a stray row deleted: history only, the goal's own wakes are untouched
        if state.watchdog is None:
            return {}  # no watchdog of its own to receipt (a prepare comes first)
        changed: dict[str, Any] = {"status": _RECEIPT_STATUS[self.status],
                                   "last_receipt": self.status, "last_receipt_at": at}
        if self.status == "created":
            due = datetime.fromisoformat(self.due_at) if self.due_at else None
            changed["next_due_at"] = due
            changed["early_fire"] = None  # a new schedule: fires compare afresh
            if self.backend == HOST:
                changed["anchor"] = due  # the host's schedule is what fires
            if self.host_ref_sha256 is not None:
                changed["host_ref_sha256"] = self.host_ref_sha256
                changed["runs_on"] = self.runs_on
        if self.status == "create_failed":
            changed["retry_allowed"] = self.retry_allowed
            if not self.retry_allowed:
                changed["status"] = "failed"
        changed.update(repaired(state, self, at))
        return {"watchdog": state.watchdog.but(**changed),
                **(host_heard(state) if self.backend == HOST else {}),
                **unlisted_by_repair(state, self)}

    def line(self) -> str:
        text = f"{known(self.backend)} watchdog {known(self.status)}"
        text += f", due {short(self.due_at)}" if self.due_at else ""
        text += f", runs on {known(self.runs_on)}" if self.runs_on else ""
        text += f", attested by {clean(known(self.attested_by))}" if self.attested_by else ""
        return text + (f": {clean(known(self.note), 80)}" if self.note else "")
