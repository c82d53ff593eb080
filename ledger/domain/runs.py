"""Runs and failures, the continuation budget, approval gates and operators
(the failure rule, the continuation budget, the uncertain-attempt rule, the
approval-gate rule, the operators' rule).

The provider's error text never reaches here: the shell classifies it
(``ledger.domain.failures.classify``) and parses the reset instant
(``parse_reset``), and hands over only those facts. The events keep the class
and a sanitized hint (the reset instant or the Retry-After value).
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ledger.domain import validation
from ledger.domain.codec import Payload, event_kind, optional, stored_as
from ledger.domain.commands import LeaseProof
from ledger.domain.endings import GoalBlocked, GoalFailed
from ledger.domain.errors import DomainError, InvalidCommand
from ledger.domain.events import Changes, Event, Style, iso
from ledger.domain.failures import (
    AUTH,
    CLASSES,
    OWNER_VERIFICATION,
    REQUEST_TOO_LARGE,
    UNCLASSIFIED,
)
from ledger.domain.interventions import (
    SILENCES,
    ApprovalRequested,
    ApprovalResolved,
    GoalRecovered,
    GoalStopped,
)
from ledger.domain.leases import LeaseReleased, fence
from ledger.domain.parts import ProviderWait, active
from ledger.domain.policy import RESET_MARGIN_SECONDS
from ledger.domain.resets import RESET_HORIZON
from ledger.domain.resume import reset_wake_at
from ledger.domain.state import (
    BLOCKED,
    FAILED,
    PAUSED,
    RATE_LIMIT_STOPPED,
    RATE_LIMITED,
    RUNNING,
    GoalState,
)
from ledger.domain.text import clean, known, short
from ledger.domain.watchdogs import WakeScheduled

BACKOFF_FIRST = timedelta(minutes=30)
BACKOFF_MAX = timedelta(hours=24)
# A per-minute request limit (or the server's throttling) with no stated reset: it lifts
# within a minute or so, so the goal backs off in minutes, not the usage window's hours.
REQUEST_BACKOFF_FIRST = timedelta(minutes=1)
REQUEST_BACKOFF_MAX = timedelta(minutes=15)
RECOVERABLE = frozenset({"SESSION_CHANGED", "SESSION_ACTIVITY", "UNCLASSIFIED",
                         "REQUEST_TOO_LARGE",
                         "RATE_LIMIT_STOPPED", "CONTINUATION_STOPPED", "AUTH_FAILED",
                         "INTERRUPTED_UNKNOWN", "WAKE_RETRIES_EXHAUSTED",
                         # The agent said it cannot go on; a human who fixed the
                         # cause must be able to send it back to work.
                         "AGENT_BLOCKED",
                         # A due wake nobody pulled (docs/design.md, "Wakes and claims").
                         "READY_UNCLAIMED"})
SESSION_IDENTITY = ("session_id", "session_key", "model")


# A report that ends nothing (outcome "note"): what the run went on through.
# - SUBAGENT_FAILURE: a subagent's request failed; its parent's turn goes on.
# - HELPER_FAILURE: a helper query failed (the host says so, or its transcript
#   shows the main turn going on): the turn goes on.
# - PROVIDER_WAIT: the host waits inside its own retry for the provider's
#   reset (Claude Code's retry watchdog): running, but waiting until then.
# - NEW_SESSION: a continuation found no saved chat to resume (Gemini CLI
#   after a run that failed on its first request) and started a new session,
#   carrying the resume packet.
# None pauses, blocks, charges or ends the lease: the host did not stop.
SUBAGENT_FAILURE = "subagent_failure"
HELPER_FAILURE = "helper_failure"
PROVIDER_WAIT = "provider_wait"
NEW_SESSION = "new_session"
NOTES = (SUBAGENT_FAILURE, HELPER_FAILURE, PROVIDER_WAIT, NEW_SESSION)
OUTCOMES = ("ok", "error", "note")


@dataclass(frozen=True, slots=True)
class ReportRun:
    """How a run ended, already classified by the shell."""

    proof: LeaseProof | None
    outcome: str  # ok | error | note (NOTES: the run went on)
    error_class: str = ""  # one of CLASSES when outcome is error
    reset_at: datetime | None = None  # the provider's reset instant, without margin
    retry_after: str = ""  # the raw Retry-After header value (a sanitized hint)
    session: dict[str, Any] = field(default_factory=dict)
    reset_schedule_name: str = ""  # internal: the one-off wake's django-q2 schedule
    margin_seconds: int = RESET_MARGIN_SECONDS  # the server's margin after a reset
    # A rate limit's text named a usage window (hours) rather than a per-minute request
    # limit (minutes): which backoff applies when no reset is stated.
    usage_window: bool = True
    note: str = ""  # with outcome "note": one of NOTES


@dataclass(frozen=True, slots=True)
class ReportSessionActivity:
    """A later turn in the goal's own session finished without its lease (an
    observer saw the owner go on by hand while the goal waited): the goal
    waits for a human before any wake continues it (SESSION_ACTIVITY)."""

    session: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RequestApproval:
    proof: LeaseProof | None
    gate: str
    summary: str = ""


@dataclass(frozen=True, slots=True)
class ResolveApproval:
    gate: str
    decision: str  # approve | reject
    operator: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class Stop:
    operator: str
    reason: str


@dataclass(frozen=True, slots=True)
class Recover:
    operator: str
    reason: str


# ---------------------------------------------------------------- run reports


def backoff(consecutive: int) -> timedelta:
    """30 min, doubling per consecutive rate limit without a reset time, at most 24 h."""
    return min(BACKOFF_FIRST * (2 ** max(0, min(consecutive, 16))), BACKOFF_MAX)


def request_backoff(consecutive: int) -> timedelta:
    """A per-minute limit: 1 min, doubling per consecutive rate limit, at most 15 min."""
    return min(REQUEST_BACKOFF_FIRST * (2 ** max(0, min(consecutive, 16))),
               REQUEST_BACKOFF_MAX)


def report(state: GoalState, cmd: ReportRun, now: datetime) -> list[Event]:
    lease = fence(state, cmd.proof)
    if cmd.outcome not in OUTCOMES:
        raise InvalidCommand("outcome must be ok, error or note", field="outcome")
    if cmd.outcome == "note":
        return [noted(cmd, now)]
    if cmd.outcome == "error" and cmd.error_class not in CLASSES:
        raise InvalidCommand(f"error_class must be one of {', '.join(CLASSES)}",
                             field="error_class")
    retry_after = validation.text(cmd.retry_after, "retry_after", limit=64)
    reported = RunReported(
        outcome=cmd.outcome,
        error_class=cmd.error_class if cmd.outcome == "error" else "",
        reset_at=iso(cmd.reset_at) if cmd.reset_at else "",
        retry_after=retry_after,
    )
    events = [Event(reported, now)]
    changed = _session_change(state, cmd.session)
    if changed:
        why = f"the run's {changed} differs from the goal's registered session"
        return [*events, _block("SESSION_CHANGED", why, now)]
    if cmd.outcome == "ok":
        return events
    generation = lease.generation
    if cmd.error_class == AUTH:
        return [*events, Event(GoalFailed(summary="authentication failed",
                                          reason="AUTH_FAILED", generation=generation), now)]
    if cmd.error_class == OWNER_VERIFICATION:
        return [*events, Event(GoalFailed(summary="the owner must verify the account",
                                          reason="OWNER_VERIFICATION", generation=generation),
                               now)]
    if cmd.error_class == UNCLASSIFIED:
        why = "the run failed for a reason a human must look at"
        return [*events, _block("UNCLASSIFIED", why, now)]
    if cmd.error_class == REQUEST_TOO_LARGE:
        # A 429, but no wait lifts it: one request exceeds the per-minute limit itself.
        why = "one request exceeds the provider's per-minute limit: waiting never helps"
        return [*events, _block("REQUEST_TOO_LARGE", why, now)]
    # The continuation budget: once the budget is spent, the next rate limit stops the goal.
    block = budget_block(state, rate_limited=True)
    if block:
        why = (f"rate limited with the continuation budget spent "
               f"({state.continuations_used} of {state.setting('max_continuations')})")
        return [*events, _block(block, why, now)]
    if cmd.reset_at is not None:
        margin = timedelta(seconds=cmd.margin_seconds)
        until = min(max(cmd.reset_at, now), now + RESET_HORIZON) + margin
        hint = f"provider reset + {cmd.margin_seconds} s"
    elif cmd.usage_window:
        wait = backoff(state.rate_limits)
        until = now + wait
        hint = f"backoff {int(wait.total_seconds() // 60)} min"
    else:
        wait = request_backoff(state.rate_limits)
        until = now + wait
        hint = f"request-rate backoff {int(wait.total_seconds() // 60)} min"
    events.append(Event(GoalPaused(until=iso(until), basis=hint, generation=generation), now))
    events.append(Event(LeaseReleased(generation=generation), now))
    if state.setting("scheduler") == "internal" and cmd.reset_schedule_name:
        # One watchdog per goal: a one-off wake at the reset, besides the one watchdog.
        # At the reset; later when the host continues by itself (its grace)
        # or the reset falls in the goal's quiet hours (ledger.domain.resume).
        events.append(Event(WakeScheduled(kind="reset", due_at=iso(reset_wake_at(state, until)),
                                          schedule_name=cmd.reset_schedule_name), now))
    return events


def noted(cmd: ReportRun, now: datetime) -> Event:
    """A failure or a wait the run went on through: one event, no pause. The
    class is kept (a note of a rate limit reads as one); a provider wait must
    say until when, or it could not be told from plain running."""
    if cmd.note not in NOTES:
        raise InvalidCommand(f"note must be one of {', '.join(NOTES)}", field="note")
    if cmd.error_class and cmd.error_class not in CLASSES:
        raise InvalidCommand(f"error_class must be one of {', '.join(CLASSES)}",
                             field="error_class")
    if cmd.note == PROVIDER_WAIT and cmd.reset_at is None:
        raise InvalidCommand("a provider wait needs the reset it waits for (retry_after)",
                             field="retry_after")
    until = min(max(cmd.reset_at, now), now + RESET_HORIZON) if cmd.reset_at else None
    return Event(RunReported(outcome="note", error_class=cmd.error_class,
                             reset_at=iso(until) if until else "",
                             retry_after=validation.text(cmd.retry_after, "retry_after",
                                                         limit=64),
                             note=cmd.note), now)


def provider_wait(state: GoalState, now: datetime) -> ProviderWait | None:
    """The provider wait the goal shows (None for none): recorded under the
    lease that still holds, and its reset still ahead. A wait outlives neither:
    a new lease, a pause or an end is news of its own, and once the reset has
    passed the host is running again (or reports its next wait)."""
    wait = state.provider_wait
    if (wait is None or state.status != RUNNING or state.lease is None
            or state.lease.generation != wait.generation or wait.until <= now):
        return None
    return wait


def session_activity(state: GoalState, cmd: ReportSessionActivity, now: datetime) -> list[Event]:
    key = cmd.session.get("session_key") if isinstance(cmd.session, dict) else None
    if not key or key != state.session_key:
        raise InvalidCommand("session.session_key must be the goal's registered session key",
                             field="session")
    if state.status == BLOCKED:
        return []  # already waiting for a human: one stop, not one per turn
    if state.status == RUNNING and state.lease is not None:
        # A turn under the goal's lease is its holder's work, not a human's.
        raise InvalidCommand("the goal's lease is held: that turn was its holder's",
                             field="session")
    return [_block("SESSION_ACTIVITY", "a later turn in the goal's session finished by hand",
                   now)]


def _session_change(state: GoalState, given: dict[str, Any]) -> str:
    for name in SESSION_IDENTITY:
        registered, now_value = state.session.get(name), given.get(name)
        if registered and now_value and registered != now_value:
            return name.replace("_", " ")
    return ""


def _block(reason: str, summary: str, now: datetime) -> Event:
    return Event(GoalBlocked(summary=summary, reason=reason, generation=0), now)


# ---------------------------------------------------------------- the continuation budget


def budget_left(state: GoalState) -> int:
    return max(0, state.setting("max_continuations") - state.continuations_used)


def budget_block(state: GoalState, *, rate_limited: bool | None = None) -> str:
    """The continuation budget, the one place it is decided: the reason a goal blocks when a
    continuation would be charged (a wake, a pull) or a rate limit reported
    with the budget spent — RATE_LIMIT_STOPPED while rate limited (by default:
    while the goal has a pause), else CONTINUATION_STOPPED; "" while some
    budget is left."""
    if budget_left(state):
        return ""
    if rate_limited is None:
        rate_limited = bool(state.paused_until)
    return RATE_LIMIT_STOPPED if rate_limited else "CONTINUATION_STOPPED"


def charge_event(state: GoalState, occurrence: str, now: datetime) -> Event:
    """The continuation budget: a recovery continuation charged, in the
    transaction that grants its lease."""
    return Event(ContinuationCharged(attempt=state.continuations_used + 1,
                                     max=state.setting("max_continuations"),
                                     occurrence_id=occurrence), now)


def budget_spent_why(state: GoalState, block: str) -> str:
    budget = state.setting("max_continuations")
    return f"the continuation budget is spent ({budget} of {budget}): {block}"


# ------------------------------------------------------- approvals (the approval-gate rule)


def request_approval(state: GoalState, cmd: RequestApproval, now: datetime) -> list[Event]:
    lease = fence(state, cmd.proof)
    gate = validation.text(cmd.gate, "gate", limit=100, required=True)
    if any(pending["gate"] == gate for pending in state.pending_approvals):
        return []
    return [Event(ApprovalRequested(gate=gate, generation=lease.generation,
                                    summary=validation.text(cmd.summary, "summary",
                                                            limit=validation.MAX_NOTE)), now)]


def resolve_approval(state: GoalState, cmd: ResolveApproval, now: datetime) -> list[Event]:
    if cmd.decision not in ("approve", "reject"):
        raise InvalidCommand("decision must be approve or reject", field="decision")
    if not any(pending["gate"] == cmd.gate for pending in state.pending_approvals):
        raise DomainError(f"no pending approval gate {cmd.gate!r}", code="not_found",
                          field="gate")
    operator = validation.text(cmd.operator, "operator", limit=validation.MAX_KEY, required=True)
    events = [Event(ApprovalResolved(gate=cmd.gate, decision=cmd.decision, operator=operator,
                                     note=validation.text(cmd.note, "note",
                                                          limit=validation.MAX_NOTE)), now)]
    if cmd.decision == "reject":
        # A rejection closes the goal.
        events.append(Event(GoalFailed(summary=f"gate {cmd.gate} rejected by {operator}",
                                       reason="APPROVAL_REJECTED", generation=0), now))
    return events


# ---------------------------------------------------------- operators (the operators' rule)


def stop(state: GoalState, cmd: Stop, now: datetime) -> list[Event]:
    operator = validation.text(cmd.operator, "operator", limit=validation.MAX_KEY, required=True)
    reason = validation.text(cmd.reason, "reason", limit=validation.MAX_NOTE, required=True)
    return [Event(GoalStopped(operator=operator, reason=reason, summary=reason), now)]


def recover(state: GoalState, cmd: Recover, now: datetime) -> list[Event]:
    operator = validation.text(cmd.operator, "operator", limit=validation.MAX_KEY, required=True)
    reason = validation.text(cmd.reason, "reason", limit=validation.MAX_NOTE, required=True)
    silence = _silence(state)
    if silence:
        silent = [job["job_id"] for job in state.running_jobs() if job.get("silent_at")]
        return [Event(GoalRecovered(operator=operator, reason=reason, from_status=state.status,
                                    from_reason=silence, written_off_jobs=silent or None),
                      now)]
    recoverable = (state.status == BLOCKED or (state.status == FAILED
                                               and state.reason == "AUTH_FAILED"))
    if not recoverable or state.reason not in RECOVERABLE:
        what = f"{state.status}/{state.reason}" if state.reason else state.status
        raise DomainError(
            f"a {what} goal cannot be recovered; recover takes "
            f"{', '.join(sorted(RECOVERABLE))}"
            + (" (an approval gate is resolved with approve/reject)"
               if state.reason == "BLOCKED_APPROVAL" else ""),
            code="not_recoverable")
    return [Event(GoalRecovered(operator=operator, reason=reason, from_status=state.status,
                                from_reason=state.reason), now)]


# ---------------------------------------------------------------- the silence a recover answers


def _silence(state: GoalState) -> str:
    """The HOST_SILENT or JOB_SILENT alert of a goal that is not blocked, or ""."""
    if state.terminal or state.status == BLOCKED:
        return ""
    if state.alert_reason in SILENCES:
        return state.alert_reason
    if any(job.get("silent_at") for job in state.running_jobs()):
        return "JOB_SILENT"
    return ""


# ---------------------------------------------------------------- the run kinds


@event_kind("run.reported")
@dataclass(frozen=True, slots=True, kw_only=True)
class RunReported(Payload):
    STYLE = Style("run", marker="failure")  # a marker when it reports an error

    outcome: str  # ok | error | note
    error_class: str = stored_as("class")
    reset_at: str
    retry_after: str
    # With outcome "note": what the run went on through (NOTES), recorded
    # without a pause; absent on every other report.
    note: str | None = optional()

    def fold(self, state: GoalState, at: datetime) -> Changes:
        changes: Changes = {}
        lease = state.lease
        if lease is not None:
            # A sign of life (the uncertain-attempt rule).
            changes["lease"] = active(lease)
        if self.outcome == "ok":
            changes["rate_limits"] = 0
        if self.note == PROVIDER_WAIT and lease is not None:
            until = datetime.fromisoformat(self.reset_at)
            changes["provider_wait"] = ProviderWait(error_class=self.error_class, until=until,
                                                    since=at, generation=lease.generation)
            # Waiting for a stated reset is not a lack of progress (as a pause is
            # not): the progress clock starts again at the reset.
            changes["progress_since"] = max(state.progress_since or at, until)
        return changes

    def line(self) -> str:
        if self.outcome == "ok":
            return "ok"
        if self.outcome == "note":  # the run went on: nothing paused
            text = (f"noted, not ended: {known(self.note)}"
                    + (f" ({self.error_class})" if self.error_class else ""))
            return text + (f", until {short(self.reset_at)}" if self.reset_at else "")
        text = self.error_class or "error"
        text += f", reset {short(self.reset_at)}" if self.reset_at else ""
        return text + (f", retry-after {clean(known(self.retry_after))}"
                       if self.retry_after else "")


@event_kind("goal.paused")
@dataclass(frozen=True, slots=True, kw_only=True)
class GoalPaused(Payload):
    CHANGES_LEASE = True
    STYLE = Style("goal", colour="yellow", marker="pause")

    until: str
    basis: str
    generation: int

    def fold(self, state: GoalState, at: datetime) -> Changes:
        # The wait for a stated reset is not a lack of progress: the clock starts
        # again when the pause ends.
        until = datetime.fromisoformat(self.until)
        return {"status": PAUSED, "reason": RATE_LIMITED, "paused_until": until,
                "rate_limits": state.rate_limits + 1, "progress_since": until,
                "paused_at": at}

    def line(self) -> str:
        return f"paused until {short(self.until)} ({clean(known(self.basis))})"


@event_kind("continuation.charged")
@dataclass(frozen=True, slots=True, kw_only=True)
class ContinuationCharged(Payload):
    STYLE = Style("continuation")

    attempt: int
    max: int
    occurrence_id: str

    def fold(self, state: GoalState, at: datetime) -> Changes:
        return {"continuations_used": self.attempt}

    def line(self) -> str:
        return f"continuation {known(self.attempt)} of {known(self.max)} charged"
