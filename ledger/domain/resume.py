"""The resume policy of a goal (docs/agents.md, "Resume policy"): when a
reset's continuation may run. ``auto``: at the reset; ``ask``: once a person
approved it (the approval gate ``resume``); ``quiet_hours``: never inside the
window, the wake waits for its end. A host known to continue by itself
(``host_continues``) is given a bounded grace before the reset's wake."""

from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from ledger.domain.policy import RESUME_SETTINGS
from ledger.domain.state import GoalState

# The approval gate of the resume policy "ask".
RESUME_GATE = "resume"


def setting(state: GoalState, name: str) -> Any:
    """A resume setting of the goal, or its default (only given ones are stored)."""
    return state.policy.get(name, RESUME_SETTINGS[name])


def quiet_until(state: GoalState, now: datetime) -> datetime | None:
    """The end of the quiet window ``now`` is in, or None (not quiet, or the
    goal's resume policy is not quiet_hours). Local wall times in the
    window's zone (else the session's): the window may cross midnight."""
    window = setting(state, "quiet_hours")
    if setting(state, "resume") != "quiet_hours" or not window:
        return None
    zone = ZoneInfo(window.get("timezone") or state.zone())
    local = now.astimezone(zone)
    start, end = _hhmm(window["start"]), _hhmm(window["end"])
    clock = local.time().replace(tzinfo=None)
    inside = start <= clock < end if start < end else (clock >= start or clock < end)
    if not inside:
        return None
    ends = datetime.combine(local.date(), end, tzinfo=zone)
    if ends <= local:
        ends = datetime.combine(local.date() + timedelta(days=1), end, tzinfo=zone)
    return ends


def _hhmm(text: str) -> time:
    return time(int(text[:2]), int(text[3:]))


def wants_approval(state: GoalState) -> bool:
    """Resume policy ask: this reset's continuation waits for a person's approval."""
    return (setting(state, "resume") == "ask" and bool(state.paused_until)
            and state.resume_approved != state.paused_until)


def reset_wake_at(state: GoalState, until: datetime) -> datetime:
    """When the reset's wake fires for a pause until ``until``: at the reset;
    after the host's grace when the host continues by itself (the wake is
    the backstop for a native continue that never fires); and never inside
    the quiet window (it waits for its end)."""
    due = until
    if setting(state, "host_continues"):
        due += timedelta(minutes=setting(state, "host_grace_minutes"))
    return quiet_until(state, due) or due


def breach(state: GoalState, now: datetime) -> str:
    """Which resume policy a continuation now would break ("" for none)."""
    if wants_approval(state):
        return "ask"
    if quiet_until(state, now) is not None:
        return "quiet_hours"
    return ""
