"""One-off wakes (one watchdog per goal): the one an agent asks for at its turn boundary, the
one a job that ended (``dependency_ready``) or the sweeper (timeout recovery)
asks for. They never retime or replace the recurring watchdog."""

from dataclasses import replace
from datetime import datetime, timedelta

from ledger.domain import validation
from ledger.domain.claims import WAKE_REASONS, ready_for_pull
from ledger.domain.commands import WakeRequest
from ledger.domain.errors import InvalidCommand
from ledger.domain.events import Event, iso
from ledger.domain.state import GoalState
from ledger.domain.watchdogs import HOST, INTERNAL, WakeScheduled, requested_schedule_name


def requested_wake_events(state: GoalState, request: WakeRequest, now: datetime) -> list[Event]:
    """The one-off wake an agent asks for as it releases its lease: at least a
    minute away, at most one watchdog interval (one watchdog per goal: it never retimes or
    replaces the recurring watchdog; a later request replaces this one)."""
    if request.reason not in WAKE_REASONS:
        raise InvalidCommand(f"wake.reason must be one of {', '.join(WAKE_REASONS)}",
                             field="wake.reason")
    if (request.in_seconds is None) == (not request.at):
        raise InvalidCommand("wake needs exactly one of in_seconds and at", field="wake")
    if request.in_seconds is not None:
        if isinstance(request.in_seconds, bool) or not isinstance(request.in_seconds, int):
            raise InvalidCommand("wake.in_seconds must be a whole number",
                                 field="wake.in_seconds")
        due = now + timedelta(seconds=request.in_seconds)
    else:
        due = datetime.fromisoformat(validation.instant(request.at, "wake.at"))
    limit = state.interval_seconds
    seconds = (due - now).total_seconds()
    if not 60 <= seconds <= limit:
        raise InvalidCommand(f"a requested wake must be between 60 s and the watchdog's "
                             f"interval ({limit} s) away", field="wake")
    return one_off_wake(state, due, request.reason, now)


def one_off_wake(state: GoalState, due: datetime, reason: str, now: datetime, *,
                 requested_by: str = "") -> list[Event]:
    """A one-off wake at ``due``: the agent's own request, a job that ended
    (``dependency_ready``), or the sweeper's timeout recovery
    (``requested_by`` "liveness")."""
    wake = WakeScheduled(kind="requested", due_at=iso(due), reason=reason,
                         requested_by=requested_by or None,
                         replaces=iso(state.requested_wake.due_at)
                         if state.requested_wake is not None else None)
    if state.setting("scheduler") == INTERNAL:
        return [Event(replace(wake, schedule_name=requested_schedule_name(state.goal_id)), now)]
    # A host goal: only its host can schedule it. The wake is due now, so
    # the goal is ready for its agent to pull; a later one is the host's to
    # create, from the answer (recorded here for the audit).
    if due <= now:
        return [ready_for_pull(f"dependency:{iso(now)}", HOST, "requested", reason,
                               "ready: a job it waited for ended", state.retry_count + 1, now)]
    return [Event(wake, now)]

