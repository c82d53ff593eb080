"""Telling a human: when a notification is due, and what it says.

Healthchecks' rule: one notification per change of standing, never one per
event. A goal's standing is whether it needs a human — ``liveness.attention``
non-empty, the stored truth behind /alerts — so a notification is due exactly
when a command's state before and after disagree on that (``flip``); a change
of reason while it still needs one (blocked, then JOB_SILENT) is no flip.
Beside flips: a reminder while a goal stays unattended, a daily digest of
the goals that need one, and the scheduler's own standing (silent or back).

A notice carries only what is safe to show anywhere: the goal's id, key,
agent and workspace (validated at start, never a secret), the reason code and
our own text for it, since when, and a link to the goal's admin page. Never a
run's summary, a provider's text or a token.
"""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

# What a notification is about (the stored ``kind``).
STARTED = "needs_human"  # a goal started needing a human
STOPPED = "resolved"  # it stopped needing one
REMINDER = "reminder"  # it still needs one, N hours on
DIGEST = "digest"  # the day's list of goals that need one
SCHEDULER_SILENT = "scheduler_silent"  # the sweeper stopped beating
SCHEDULER_BACK = "scheduler_back"  # and beats again
LOG_ALARM = "log_alarm"  # the verifiable log's alarm rose (docs/integrity.md)
LOG_ALARM_CLEARED = "log_alarm_cleared"  # and cleared
WITNESS_BEHIND = "witness_behind"  # a witness has not cosigned for the configured lag
WITNESS_SPLIT_VIEW = "witness_split_view"  # a witness holds a checkpoint the log does not
WITNESS_ROLLBACK = "witness_rollback"  # a witness holds a larger size than the log
KINDS = (STARTED, STOPPED, REMINDER, DIGEST, SCHEDULER_SILENT, SCHEDULER_BACK, LOG_ALARM,
         LOG_ALARM_CLEARED, WITNESS_BEHIND, WITNESS_SPLIT_VIEW, WITNESS_ROLLBACK)
# Routing reasons of the notices that are not about one goal's reason.
SCHEDULER_REASON = "SCHEDULER_SILENT"
LOG_REASON = "LOG_ALARM"  # every notice about the verifiable log and its witnesses


def needs_human(attention: str) -> bool:
    """A standing: ``liveness.attention`` names a reason."""
    return bool(attention)


def flip(before: str, after: str) -> str | None:
    """The notification a change of attention calls for: STARTED when a goal
    starts needing a human, STOPPED when it stops, None otherwise."""
    was, now = needs_human(before), needs_human(after)
    if was == now:
        return None
    return STARTED if now else STOPPED


def flips(attentions: Iterable[str], start: str = "") -> Iterator[tuple[int, str]]:
    """Every flip of a sequence of standings (the goal's attention after each
    command), as (index, kind): what the store's effect records, one command
    at a time."""
    before = start
    for index, after in enumerate(attentions):
        kind = flip(before, after)
        if kind is not None:
            yield index, kind
        before = after


def reminder_due(since: datetime, last_notified: datetime, now: datetime,
                 every: timedelta) -> bool:
    """Whether a goal still unattended is due a reminder: ``every`` after it
    started needing a human and after the last notice about it (the flip or
    the previous reminder). ``every`` of zero turns reminders off."""
    if every <= timedelta(0):
        return False
    return now - since >= every and now - last_notified >= every


def digest_due(hour: int | None, last_digest: datetime | None, now: datetime) -> bool:
    """The daily digest is due once a UTC day, at or after ``hour`` (None: off)."""
    if hour is None or now.hour < hour:
        return False
    return last_digest is None or last_digest.date() < now.date()


@dataclass(frozen=True)
class Subject:
    """What a notice may say about a goal: nothing else reaches a channel."""

    goal_id: str
    goal_key: str
    agent: str
    workspace: str
    reason: str  # the reason code ("" once resolved)
    since: str  # ISO instant: when the standing began


def title(kind: str, subject: Subject | None = None, count: int = 0) -> str:
    if kind == DIGEST:
        return f"Wake Ledger: {count} goal(s) need a human"
    if kind == SCHEDULER_SILENT:
        return "Wake Ledger: the scheduler is silent"
    if kind == SCHEDULER_BACK:
        return "Wake Ledger: the scheduler runs again"
    if kind in LOG_TITLES:
        return LOG_TITLES[kind]
    assert subject is not None
    name = subject.goal_key or subject.goal_id[:8]
    return {STARTED: f"Wake Ledger: goal {name} needs a human ({subject.reason})",
            STOPPED: f"Wake Ledger: goal {name} no longer needs a human",
            REMINDER: f"Wake Ledger: goal {name} still needs a human ({subject.reason})"}[kind]


LOG_TITLES = {
    LOG_ALARM: "Wake Ledger: ALARM, the verifiable log is inconsistent; no head is signed",
    LOG_ALARM_CLEARED: "Wake Ledger: the verifiable log's alarm has cleared",
    WITNESS_BEHIND: "Wake Ledger: a witness has fallen behind the log",
    WITNESS_SPLIT_VIEW: "Wake Ledger: ALARM, a witness holds a checkpoint the log does not",
    WITNESS_ROLLBACK: "Wake Ledger: ALARM, a witness holds more of the log than it has",
}


def body(kind: str, subject: Subject, why: str, link: str, notice_id: str) -> str:
    """A goal's notice: fixed words, the subject's safe fields, the link and
    the notice's stable id (a receiver can drop a redelivered copy by it)."""
    lines = {STARTED: "needs a human", STOPPED: "no longer needs a human",
             REMINDER: "still needs a human"}[kind]
    text = [f"Goal {subject.goal_id} {lines}.",
            f"key: {subject.goal_key or '-'}  agent: {subject.agent}  "
            f"workspace: {subject.workspace or '-'}"]
    if kind != STOPPED:
        text.append(f"reason: {subject.reason}: {why}")
    text += [f"since: {subject.since}", f"open: {link}", f"notification: {notice_id}"]
    return "\n".join(text)
