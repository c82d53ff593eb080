"""How goals and events read on a terminal: `ledger goals`, `ledger show`.

Plain functions, no rules: they render what the projection and the events
already say. ``summary(kind, data)`` is plain text (no colour) so other views
(the admin's timeline) can show the same words; colour is added separately,
and only when the caller says the output is a terminal.

Everything printed here may come from an agent (objectives, steps, notes), so
it goes through ``clean`` (``ledger.domain.text``, which each event kind's
summary line uses too): one line, no control characters. An ANSI escape in
a step name would otherwise repaint the operator's terminal.
"""

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ledger.domain import GoalState
from ledger.domain.runs import budget_left, provider_wait
from ledger.domain.text import clean, items, moment
from ledger.domain.timing import next_wake_at
from ledger.domain.watchdogs import watchdog_health
from ledger.operators.colours import (
    STATUS_COLOURS,
    paint,
)

if TYPE_CHECKING:  # only for annotations: this module never queries
    from ledger.models import Goal

# ----------------------------------------------------------------------------- text


def when(value: str | datetime | None) -> str:
    """An instant as ``YYYY-MM-DD HH:MM:SS`` in UTC; ``-`` when there is none."""
    at = moment(value)
    return at.strftime("%Y-%m-%d %H:%M:%S") if at else "-"


def relative(value: str | datetime | None, now: datetime) -> str:
    """``in 12m`` / ``3h05m ago`` / ``30s ago`` / ``now`` (under a second);
    ``-`` when there is no instant. Seconds under a minute: "now" for 30 s ago
    read as "just happened" to someone watching a goal that had gone quiet."""
    at = moment(value)
    if at is None:
        return "-"
    seconds = int((at - now).total_seconds())
    if seconds == 0:
        return "now"
    span = _span(abs(seconds))
    return f"in {span}" if seconds > 0 else f"{span} ago"


def _span(seconds: int) -> str:
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86_400
    if not minutes:
        return f"{seconds}s"
    if days >= 2:
        return f"{days}d"
    if hours:
        return f"{hours}h{minutes % 60:02d}m"
    return f"{minutes}m"


# ----------------------------------------------------------------------------- goals table

GOAL_COLUMNS = ("ID", "GOAL KEY", "WORKSPACE", "AGENT", "STATUS", "REASON", "PROG", "LEASE",
                "NEXT WAKE", "UPDATED")


def short_id(goal_id: object) -> str:
    """What the table prints and `ledger show` accepts back: the id's first 8 hex digits."""
    return str(goal_id).replace("-", "")[:8]


def goal_cells(goal: "Goal", now: datetime) -> list[str]:
    state = GoalState.from_dict(goal.state)
    lease = state.lease
    return [
        short_id(goal.pk),
        clean(goal.goal_key, 28),
        clean(goal.workspace, 28, keep_end=True),
        clean(goal.agent or "-", 14),
        goal.status,
        goal.reason or provider_waiting(state, now) or "-",
        f"{state.progress_pct}%",
        f"{clean(lease.holder, 14)} g{lease.generation}" if lease is not None else "-",
        relative(goal.next_wake_at, now),
        relative(goal.updated_at, now),
    ]


def table(header: Sequence[str], rows: Iterable[Sequence[str]], *,
          paint_cell: Callable[[int, str, str], str] | None = None) -> list[str]:
    """Left-aligned columns sized to their widest cell. Widths are measured
    on plain text; ``paint_cell(column, padded, raw)`` colours after padding so
    escape codes never count as width."""
    rows = [list(row) for row in rows]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows,
                                                                        strict=False)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    for row in rows:
        cells = []
        for i, (cell, width) in enumerate(zip(row, widths, strict=True)):
            padded = cell.ljust(width)
            cells.append(paint_cell(i, padded, cell) if paint_cell else padded)
        lines.append("  ".join(cells).rstrip())
    return lines


def goals_table(goals: Iterable["Goal"], now: datetime, *, colour: bool = False) -> list[str]:
    status = GOAL_COLUMNS.index("STATUS")

    def paint_status(column: int, padded: str, raw: str) -> str:
        return paint(padded, STATUS_COLOURS.get(raw, ""), colour) if column == status else padded

    return table(GOAL_COLUMNS, (goal_cells(g, now) for g in goals), paint_cell=paint_status)


# ----------------------------------------------------------------------------- one goal


def state_lines(state: GoalState, now: datetime, *, colour: bool = False) -> list[str]:
    """The projected state at the top of `ledger show`: what the goal is doing
    and what it waits for."""
    status = paint(state.status, STATUS_COLOURS.get(state.status, ""), colour)
    reason = f" / {state.reason}" if state.reason else ""
    rows = [
        ("goal", f"{state.goal_id}  ({clean(state.goal_key)} @ "
                 f"{clean(state.workspace)}, agent {clean(state.agent or '-')})"),
        ("objective", clean(state.objective, 200)),
        ("status", ", ".join(filter(None, (status + reason + _paused(state, now),
                                           provider_waiting(state, now))))),
        ("progress", f"{_bar(state.progress_pct)} {state.progress_pct} %, "
                     f"{state.checkpoints} checkpoint(s)"),
        ("step", f"“{clean(state.current_step, 120)}”"),
        ("next", items(state.next_actions, 5) or "-"),
        ("lease", _lease_line(state, now)),
        ("watchdog", _watchdog_line(state, now)),
        ("continuations", f"{state.continuations_used} of "
                          f"{state.setting('max_continuations')} used "
                          f"({budget_left(state)} left), {state.retry_count} wake(s) since "
                          "the last checkpoint"),
        ("jobs", _jobs_line(state)),
        ("approvals", _approvals_line(state)),
    ]
    if state.summary:
        rows.append(("summary", clean(state.summary, 200)))
    rows.append(("updated", f"{when(state.updated_at)} ({relative(state.updated_at, now)}), "
                            f"created {when(state.created_at)}, {state.version} event(s)"))
    return [f"{label + ':':<15}{value}" for label, value in rows]


def _bar(pct: int, width: int = 20) -> str:
    filled = max(0, min(width, round(pct * width / 100)))
    return "[" + "█" * filled + "·" * (width - filled) + "]"


def provider_waiting(state: GoalState, now: datetime) -> str:
    """A host waiting in its own retry for the provider's reset, said beside "running"."""
    wait = provider_wait(state, now)
    if wait is None:
        return ""
    return f"waiting for provider until {when(wait.until)} ({relative(wait.until, now)})"


def _paused(state: GoalState, now: datetime) -> str:
    if state.status != "paused" or not state.paused_until:
        return ""
    return f", until {when(state.paused_until)} ({relative(state.paused_until, now)})"


def _lease_line(state: GoalState, now: datetime) -> str:
    lease = state.lease
    if lease is None:
        ended = f", last one {state.lease_end}" if state.lease_end else ""
        return f"none (generation {state.lease_generation}{ended})"
    via = ", automatic continuation" if lease.via == "wake" else ""
    return (f"{clean(lease.holder)} gen {lease.generation}, expires "
            f"{when(lease.expires_at)} ({relative(lease.expires_at, now)}), last sign "
            f"of life {relative(lease.last_heartbeat_at, now)}{via}")


def _watchdog_line(state: GoalState, now: datetime) -> str:
    watchdog = state.watchdog
    if watchdog is None:
        line = "none"
    else:
        minutes = round(watchdog.interval_seconds / 60, 1)
        line = (f"{watchdog.backend or '?'} {watchdog.status or '?'} "
                f"({watchdog_health(state)}), every {minutes:g} min")
    due = next_wake_at(state)
    if due is not None:
        line += f"; next wake {when(due)} ({relative(due, now)})"
    if state.ready is not None:
        line += f"; ready for its agent to pull ({state.ready.reason or '?'})"
    if state.last_wake is not None:
        wake = state.last_wake
        line += (f"; last wake {wake.outcome or '?'} ({wake.reason or '?'}) "
                 f"{relative(wake.at, now)}")
    return line


def _jobs_line(state: GoalState) -> str:
    running = state.running_jobs()
    if not running:
        return f"none blocking ({len(state.jobs)} tracked)" if state.jobs else "none"
    return "; ".join(f"{clean(j['kind'])} {clean(j['ref'], 60)} running since "
                     f"{when(j['tracked_at'])}" for j in running)


def _approvals_line(state: GoalState) -> str:
    if not state.pending_approvals:
        return "none pending"
    return "; ".join(f"{clean(g['gate'])} (asked {when(g.get('requested_at'))})"
                     + (f": {clean(g['summary'], 100)}" if g.get("summary") else "")
                     for g in state.pending_approvals)


def woken(claim: Any) -> str:
    """What a wake did, said plainly (`ledger wake`, the admin's wake): pushed
    to which dispatcher, or made ready for pull and why. A shell that read
    other dispatchers than the server's once made a pushed goal wait an hour
    for a pull, and said nothing."""
    # Here only: the rest of this module reads goals and events without settings.
    from django.conf import settings

    from ledger.project import dispatchers

    dispatch = str(claim.state.setting("dispatch"))
    if claim.outcome == "recurring_acquired":
        return (f"pushed to dispatcher {dispatch!r} (configured in "
                f"{settings.WAKELEDGER_DISPATCHERS_SOURCE}): it starts the continuation "
                "with the lease")
    if claim.outcome == "ready_for_pull":
        return f"ready for pull: {dispatchers.why_pulled(dispatch)}"
    return f"{claim.outcome} ({claim.report.notes})"
