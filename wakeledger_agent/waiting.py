"""What a supervisor shows and does between runs: the one terminal line it
rewrites in place, and the next step while it waits for a goal's wake
(``wakeledger supervise --until-done``). Read from the goal as the API shows
it; no Django."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledger.domain.liveness import SCHEDULER_LATENESS
from ledger.domain.runs import SILENCES
from ledger.domain.state import TERMINAL_STATUSES

# ---------------------------------------------------------------- the terminal


class Progress:
    """One line on stderr, rewritten in place, only when stderr is a
    terminal; in a pipe it prints nothing. ``say`` is for the few lines a
    person reading a log should see (a run reported, a wake pulled)."""

    def __init__(self, stream: Any = None):
        self.stream = stream or sys.stderr
        self.live = _isatty(self.stream)
        self._shown = False

    def show(self, text: str) -> None:
        if self.live:
            self.stream.write(f"\r\x1b[Kwakeledger: {text}")
            self.stream.flush()
            self._shown = True

    def clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False

    def say(self, text: str) -> None:
        self.clear()
        print(f"wakeledger: {text}", file=self.stream, flush=True)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def span(seconds: float) -> str:
    """1h 12m, 4m 05s, 9s: how long until the next wake."""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def budget(goal: dict[str, Any]) -> str:
    limit = (goal.get("policy") or {}).get("max_continuations", "?")
    return f"continuations {goal.get('continuations_used', 0)}/{limit}"


# ---------------------------------------------------------------- waiting for the wake


@dataclass(frozen=True)
class Step:
    action: str  # pull | wait | terminal | human
    seconds: float = 0.0
    why: str = ""
    due: datetime | None = None  # the next wake, for a countdown that ticks

    def line(self, now: datetime) -> str:
        if self.due is None:
            return self.why
        late = now >= self.due
        return f"{self.why} · " + ("wake due, waiting for the scheduler" if late
                                   else f"next wake in {span((self.due - now).total_seconds())}")


def instant(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None
    except ValueError:
        return None


def next_step(goal: dict[str, Any], now: datetime, poll: float) -> Step:
    """What a waiting supervisor does next, read from the goal as the API
    shows it: stop when it ended or needs a human, wait while an approval is
    pending or the wake is not due, pull a ready wake (or one the scheduler
    is minutes late with)."""
    status = goal.get("status")
    if status in TERMINAL_STATUSES:
        return Step("terminal", why=f"the goal is {status}")
    if goal.get("pending_approvals"):
        gates = ", ".join(a.get("gate", "?") for a in goal["pending_approvals"])
        return Step("wait", poll, f"waiting for an operator to decide the approval ({gates})")
    reason = (goal.get("alert") or {}).get("reason") or goal.get("reason") or status
    # HOST_SILENT, JOB_SILENT, NO_PROGRESS and WAKE_NOT_FIRING list the goal for
    # a human but do not stop it: its next run is what answers them.
    if status == "blocked" or (goal.get("liveness") == "needs_human"
                               and reason not in SILENCES):
        return Step("human", why=f"the goal needs a human ({reason})")
    if goal.get("ready"):
        return Step("pull", why="its wake is due")
    if goal.get("liveness") == "working":
        return Step("wait", poll, "another worker holds its lease")
    due = instant(goal.get("next_wake_at")) or instant(goal.get("paused_until"))
    if due is None:
        return Step("wait", poll, "no wake scheduled yet")
    if now >= due + SCHEDULER_LATENESS:
        return Step("pull", why="its wake is overdue; pulling without it")
    left = (due - now).total_seconds()
    return Step("wait", min(poll, left) if left > 0 else poll, str(status), due)
