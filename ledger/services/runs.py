"""Report how a run ended: the provider's error text is classified and its
reset time read here, on the way in, and then discarded — only the class,
the reset instant and a Retry-After that parses reach the events."""

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings

from ledger.domain import LeaseProof, failures, resets
from ledger.domain.events import iso
from ledger.domain.parts import iso_text
from ledger.domain.runs import ReportRun, ReportSessionActivity, provider_wait
from ledger.domain.timing import next_wake_at
from ledger.domain.watchdogs import reset_schedule_name
from ledger.eventstore import clock, store
from ledger.services.bodies import shown_wait
from ledger.services.caller import Caller, run, state_of


@dataclass(frozen=True)
class RunReport:
    """What the report decided: the error's class, the provider's reset, and
    where the goal stands (a rate limit pauses it and schedules one wake)."""

    classification: str
    reset_at: datetime | None
    status: str
    reason: str
    paused_until: str | None
    next_wake_at: str | None
    continuations_used: int
    max_continuations: int
    provider_wait: dict[str, Any] | None = None  # the wait the goal shows now, if any

    def as_dict(self) -> dict[str, Any]:
        return {"classification": self.classification,
                "provider_wait": self.provider_wait,
                "reset_at": iso(self.reset_at) if self.reset_at else None,
                "status": self.status, "reason": self.reason,
                "paused_until": self.paused_until, "next_wake_at": self.next_wake_at,
                "continuations": {"used": self.continuations_used,
                                  "max": self.max_continuations}}


def classified(error_text: str, retry_after: str, tz: str,
               now: datetime) -> tuple[str, datetime | None, str]:
    """(class, reset instant, the Retry-After kept as a hint) of a failed run.
    A Retry-After alone is the provider saying when to come back: a rate
    limit, not an unreadable failure. Only a Retry-After that parses is kept."""
    error_class = failures.classify(error_text) if error_text.strip() else failures.RATE_LIMIT
    reset_at = None
    if error_class == failures.RATE_LIMIT:
        reset_at = resets.parse_reset(error_text, now=now, tz=tz, retry_after=retry_after or None)
    hint = retry_after if retry_after and resets.parse_retry_after(retry_after, now) else ""
    return error_class, reset_at, hint


def usage_window(error_text: str) -> bool:
    """Whether a rate limit without a stated reset waits out a usage window (hours)
    or a per-minute request limit (minutes); the text is read, then dropped."""
    return failures.usage_window(error_text)


def report_run(caller: Caller, goal_id: str | uuid.UUID, proof: LeaseProof | None, *,
               outcome: str, error_text: str = "", timezone: str = "", retry_after: str = "",
               session: dict[str, Any] | None = None, note: str = "") -> RunReport:
    """A run's end (``ok``/``error``), or a ``note`` of what it went on
    through (ledger.domain.runs.NOTES): a note with neither text nor
    Retry-After has no class."""
    error_class, reset_at, hint = "", None, ""
    if outcome == "error" or (outcome == "note" and (error_text.strip() or retry_after)):
        # The reset's wall-clock time is read in the caller's zone, else the session's.
        tz = state_of(caller, goal_id).zone(timezone)
        error_class, reset_at, hint = classified(error_text, retry_after, tz, clock.now())
    command = ReportRun(proof, outcome, error_class, reset_at, hint, dict(session or {}),
                        reset_schedule_name(store.canonical_id(goal_id)),
                        settings.WAKELEDGER_RESET_MARGIN_SECONDS,
                        usage_window=usage_window(error_text), note=note)
    after = run(caller, goal_id, command).state
    return RunReport(error_class, reset_at, after.status, after.reason,
                     iso_text(after.paused_until) or None, iso_text(next_wake_at(after)) or None,
                     after.continuations_used, after.setting("max_continuations"),
                     shown_wait(provider_wait(after, clock.now())))


def report_session_activity(caller: Caller, goal_id: str | uuid.UUID,
                            session: dict[str, Any]) -> RunReport:
    """An observer saw a later turn of the goal's session finish without the
    goal's lease (the owner went on by hand): the goal blocks for a human
    (SESSION_ACTIVITY) instead of a wake continuing work the human changed."""
    after = run(caller, goal_id, ReportSessionActivity(dict(session))).state
    return RunReport("", None, after.status, after.reason, iso_text(after.paused_until) or None,
                     iso_text(next_wake_at(after)) or None, after.continuations_used,
                     after.setting("max_continuations"))
