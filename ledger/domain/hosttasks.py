"""A goal as a host follows it: the task status a host that runs a tool call
as a task (MCP's tasks) reads from the goal's state, in our own words, and
how soon it should look again.

Pure: the state and the time in, a ``TaskView`` out. The words are ours
only — never the goal's error list, its summary or any provider's text,
which a host would show a person as if the server said it
(docs/agents.md, "Following a goal as a task").
"""

from dataclasses import dataclass
from datetime import datetime

from ledger.domain.parts import iso_text
from ledger.domain.state import BLOCKED, DONE, FAILED, PAUSED, RUNNING, STOPPED, GoalState
from ledger.domain.text import clean

WORKING = "working"
INPUT_REQUIRED = "input_required"
COMPLETED = "completed"
CANCELLED = "cancelled"
TASK_STATUSES = (WORKING, INPUT_REQUIRED, COMPLETED, "failed", CANCELLED)
TERMINAL = frozenset({COMPLETED, "failed", CANCELLED})

# How soon a host should look again, in seconds. A goal that runs may end at
# any moment; a goal that waits for a wake changes at that wake (or earlier,
# when a person wakes it), so the host is told the wake's time, bounded: at
# least MIN (a wake already due), at most MAX (an operator's early wake or
# stop is seen within that), never every few seconds for a three-hour pause.
MIN_POLL_SECONDS = 5
RUNNING_POLL_SECONDS = 15
APPROVAL_POLL_SECONDS = 30
IDLE_POLL_SECONDS = 60  # waiting to be resumed, with no wake of ours ahead
MAX_POLL_SECONDS = 600

# The reason a stop made through a task's cancel records: what tells
# "cancelled through the task" from any other operator stop afterwards.
CANCEL_REASON = "cancelled through its MCP task (tasks/cancel)"

# The longest gate name a status message repeats (gates are short names; the
# task's gates themselves are whole, they key the approvals' answers).
_GATE = 60


@dataclass(frozen=True)
class TaskView:
    """What a host is told: the task status, a one-line message, the poll
    interval (None once terminal), whether a terminal task ended without the
    goal's completion, and the approvals it waits for (gate names)."""

    status: str
    message: str
    poll_seconds: int | None
    is_error: bool = False
    gates: tuple[str, ...] = ()

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


def next_wake(state: GoalState) -> datetime | None:
    """The earliest time at which something of ours wakes the goal (it may be
    due already): the end of its pause, its reset's or requested one-off
    wake, its live watchdog's next slot. None when nothing is scheduled."""
    times = [state.paused_until,
             state.reset_wake.due_at if state.reset_wake else None,
             state.requested_wake.due_at if state.requested_wake else None,
             state.watchdog.next_due_at
             if state.watchdog is not None and state.watchdog.status == "live" else None]
    pending = [moment for moment in times if moment is not None]
    return min(pending) if pending else None


def poll_seconds(state: GoalState, now: datetime) -> int:
    """How soon to look again at a goal that is not over (bounded)."""
    if state.status == RUNNING:
        return RUNNING_POLL_SECONDS
    if state.status == BLOCKED:
        return APPROVAL_POLL_SECONDS if state.pending_approvals else MAX_POLL_SECONDS
    if state.ready is not None:
        return MIN_POLL_SECONDS  # a wake is due and waits to be pulled
    wake = next_wake(state)
    if wake is None:
        return IDLE_POLL_SECONDS
    if wake <= now:
        return RUNNING_POLL_SECONDS  # due: the wake runs it any moment now
    seconds = int((wake - now).total_seconds()) + 1
    return max(MIN_POLL_SECONDS, min(MAX_POLL_SECONDS, seconds))


def task_view(state: GoalState, now: datetime, *, stop_reason: str = "") -> TaskView:
    """The task status of a goal. ``stop_reason`` is the reason its stop
    recorded (a stopped goal only): a stop made through the task's cancel is
    ``cancelled``, any other stop ends the task as an error."""
    if state.status == DONE:
        return TaskView(COMPLETED, "The goal completed with evidence for its done criteria.",
                        None)
    if state.status == FAILED:
        why = f" ({state.reason})" if state.reason else ""
        return TaskView(COMPLETED, f"The goal failed{why}.", None, is_error=True)
    if state.status == STOPPED:
        if stop_reason == CANCEL_REASON:
            return TaskView(CANCELLED, "The goal was stopped: its task was cancelled.", None)
        return TaskView(COMPLETED, "An operator stopped the goal.", None, is_error=True)
    poll = poll_seconds(state, now)
    if state.status == BLOCKED and state.pending_approvals:
        gates = tuple(str(gate.get("gate", "")) for gate in state.pending_approvals)
        named = ", ".join(f"'{clean(gate, _GATE)}'" for gate in gates)
        return TaskView(INPUT_REQUIRED, f"Waiting for a person allowed to approve to decide "
                        f"gate {named}.", poll, gates=gates)
    if state.status == BLOCKED:
        return TaskView(WORKING, f"Blocked ({state.reason or 'no reason given'}): it waits "
                        "for an operator to recover it.", poll)
    if state.status == RUNNING:
        step = f", checkpoint {state.checkpoints}" if state.checkpoints else ""
        return TaskView(WORKING, f"Running: {state.progress_pct} % done{step}.", poll)
    wake = next_wake(state)
    if state.status == PAUSED:
        until = iso_text(state.paused_until) or "its reset"
        return TaskView(WORKING, f"Paused by a rate limit until {until}; a wake resumes it "
                        "then.", poll)
    if state.ready is not None:
        return TaskView(WORKING, "Waiting: a wake is due and waits for its agent to take it.",
                        poll)
    if wake is not None and wake <= now:
        return TaskView(WORKING, "Waiting: its wake is due and resumes it shortly.", poll)
    if wake is not None:
        return TaskView(WORKING, f"Waiting for its next wake at {iso_text(wake)}.", poll)
    if not state.status:
        return TaskView(WORKING, "Starting.", poll)
    return TaskView(WORKING, "Waiting to be resumed.", poll)
