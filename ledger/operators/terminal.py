"""How goals and events read on a terminal: `ledger goals`, `ledger show`.

Plain functions, no rules: they render what the projection and the events
already say. ``summary(kind, data)`` is plain text (no colour) so other views
(the admin's timeline) can show the same words; colour is added separately,
and only when the caller says the output is a terminal.

Everything printed here may come from an agent (objectives, steps, notes), so
it goes through ``clean``: one line, no control characters. An ANSI escape in
a step name would otherwise repaint the operator's terminal.
"""

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ledger.domain import GoalState
from ledger.domain import events as ev
from ledger.domain.codec import decode_or_none
from ledger.domain.runs import budget_left
from ledger.domain.timing import next_wake_at
from ledger.domain.watchdogs import watchdog_health
from ledger.operators.colours import (
    FAMILY_ICONS,
    STATUS_COLOURS,
    family,
    kind_colour,
    paint,
)

if TYPE_CHECKING:  # only for annotations: this module never queries
    from ledger.models import Goal

# ----------------------------------------------------------------------------- text

# C0 and C1 controls (ESC among them), DEL, and the bidirectional overrides
# that can make a line read differently from what it contains.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_BLANKS = re.compile(r"[\t\n\r]+| {2,}")


def clean(value: object, width: int | None = None, *, keep_end: bool = False) -> str:
    """``value`` as one safe line, shortened to ``width`` with an ellipsis
    (keeping the end instead of the start for paths)."""
    text = _BLANKS.sub(" ", _UNSAFE.sub("\ufffd", str(value))).strip()
    if width is not None and len(text) > width:
        text = "…" + text[-(width - 1):] if keep_end else text[:width - 1] + "…"
    return text


def when(value: str | datetime | None) -> str:
    """An instant as ``YYYY-MM-DD HH:MM:SS`` in UTC; ``-`` when there is none."""
    moment = _moment(value)
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def relative(value: str | datetime | None, now: datetime) -> str:
    """``in 12m`` / ``3h05m ago`` / ``30s ago`` / ``now`` (under a second);
    ``-`` when there is no instant. Seconds under a minute: "now" for 30 s ago
    read as "just happened" to someone watching a goal that had gone quiet."""
    moment = _moment(value)
    if moment is None:
        return "-"
    seconds = int((moment - now).total_seconds())
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


def _moment(value: str | datetime | None) -> datetime | None:
    if not value:
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    try:
        return datetime.fromisoformat(value).astimezone(UTC)
    except (TypeError, ValueError):
        return None


def _short(value: object) -> str:
    """An instant inside a summary, in the one format of every page and command
    (UTC to the second, the zone said: `12-06 23:15:00` read as local time)."""
    moment = _moment(value if isinstance(value, str | datetime) else None)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else clean(value or "?")


def _items(values: object, limit: int = 3) -> str:
    items = [clean(v) for v in values] if isinstance(values, list | tuple) else []
    more = f" (+{len(items) - limit})" if len(items) > limit else ""
    return "; ".join(items[:limit]) + more


# ----------------------------------------------------------------------------- summaries
#
# One summary per payload class (ledger.domain.events): the stored data is
# decoded (and upcast) by the codec first, so a summary reads attributes,
# never string keys. Nested JSON (a plan, evidence items) is read defensively.

Summary = Callable[[Any], str]


def _v(value: object) -> object:
    """A field an older or damaged event lacks (decoded as None) reads "?"."""
    return "?" if value is None else value


def _started(d: ev.GoalStarted) -> str:
    plan = _items((d.checkpoint or {}).get("next_actions", []))
    policy = d.policy or {}
    text = f"“{clean(_v(d.objective), 80)}” by {clean(d.agent or '?')}"
    text += f" ({policy['scheduler']} scheduler)" if policy.get("scheduler") else ""
    return text + (f" → plan: {plan}" if plan else "")


def _ended(verb: str) -> Summary:
    def text(d: ev.GoalCompleted | ev.GoalFailed | ev.GoalBlocked) -> str:
        reason = getattr(d, "reason", "")
        said = clean(_v(d.summary), 120)
        return f"{verb}{f' ({reason})' if reason else ''}" + (f": {said}" if said else "")

    return text


def _evidence(items: object, limit: int = 5) -> str:
    """The acceptance evidence of a completion, one ``criterion ⇒ evidence`` per
    done criterion. A completion recorded before evidence existed has none."""
    items = [i for i in items if isinstance(i, Mapping)] if isinstance(items, list) else []
    if not items:
        return ""
    more = f" (+{len(items) - limit})" if len(items) > limit else ""
    return " · evidence: " + "; ".join(
        f"“{clean(i.get('criterion', '?'), 60)}” ⇒ {clean(i.get('evidence', ''), 100)}"
        for i in items[:limit]) + more


def evidence_lines(data: Mapping[str, Any]) -> list[str]:
    """`ledger show`'s block for a completed goal (the stored data of its
    goal.completed): each criterion and its evidence in full (one safe line each)."""
    completion = decode_or_none(ev.GOAL_COMPLETED, data)
    items = completion.evidence if isinstance(completion, ev.GoalCompleted) else None
    items = [i for i in items if isinstance(i, Mapping)] if isinstance(items, list) else []
    if not items:
        return [f"{'evidence:':<15}none recorded (no done criteria, or completed before "
                "evidence was required)"]
    return [f"{'evidence:' if n == 0 else '':<15}“{clean(i.get('criterion', '?'))}” ⇒ "
            f"{clean(i.get('evidence', ''))}" for n, i in enumerate(items)]


def _checkpoint(d: ev.CheckpointRecorded) -> str:
    text = f"step “{clean(_v(d.current_step), 60)}” ({_v(d.progress_pct)} %)"
    nxt = _items(d.next_actions, 2)
    text += f" → next: {nxt}" if nxt else ""
    text += f", {len(d.artifacts)} artifact(s)" if d.artifacts else ""
    text += f", {len(d.errors)} error(s)" if d.errors else ""
    return text + (f", note: {clean(_v(d.note), 60)}" if d.note else "")


def _lease(d: ev.LeaseGranted) -> str:
    text = f"gen {_v(d.generation)} to {clean(_v(d.holder))} until {_short(d.expires_at)}"
    text += " (automatic continuation)" if d.via == "wake" else ""
    if isinstance(d, ev.LeaseTakenOver):
        text += (f", taken over from gen {_v(d.previous_generation)} of "
                 f"{clean(_v(d.previous_holder))} (expired {_short(d.previous_expires_at)})")
    return text


def _scheduled(d: ev.WakeScheduled) -> str:
    if d.kind == "reset":
        return f"one-off wake at the reset, {_short(d.due_at)}"
    if d.kind == "requested":
        replaces = f" (replaces {_short(d.replaces)})" if d.replaces else ""
        return f"one-off wake asked for ({d.reason or '?'}), {_short(d.due_at)}{replaces}"
    seconds = d.interval_seconds or 0
    minutes = round(seconds / 60, 1)
    every = f"{minutes:g} min" if minutes >= 1 else f"{_v(d.interval_seconds)} s"
    retry = " (retry)" if (d.attempt or 1) > 1 else ""
    return (f"{d.backend or '?'} watchdog every {every}{retry}, first due "
            f"{_short(d.first_due_at)}")


def _receipt(d: ev.ReceiptRecorded) -> str:
    text = f"{_v(d.backend)} watchdog {_v(d.status)}"
    text += f", due {_short(d.due_at)}" if d.due_at else ""
    text += f", runs on {_v(d.runs_on)}" if d.runs_on else ""
    text += f", attested by {clean(_v(d.attested_by))}" if d.attested_by else ""
    return text + (f": {clean(_v(d.note), 80)}" if d.note else "")


def _claimed(d: ev.WakeClaimed) -> str:
    text = f"{_v(d.outcome)} ({d.reason or '?'}), {_v(d.source)}"
    if d.retry_after_seconds is not None:
        text += f", retry in {_v(d.retry_after_seconds)} s"
    if d.outcome in ("recurring_acquired", "ready_for_pull") and d.retry_count is not None:
        text += f", wake {_v(d.retry_count)} since the last checkpoint"
    if d.operator:
        text += f", by {clean(_v(d.operator))} ({clean(d.why or '', 60)})"
    return text + (f": {clean(_v(d.notes), 90)}" if d.notes else "")


def _run(d: ev.RunReported) -> str:
    if d.outcome == "ok":
        return "ok"
    text = d.error_class or "error"
    text += f", reset {_short(d.reset_at)}" if d.reset_at else ""
    return text + (f", retry-after {clean(_v(d.retry_after))}" if d.retry_after else "")


def _dispatched(d: ev.ContinuationDispatched) -> str:
    result = "ok" if d.ok else "uncertain" if d.uncertain else "failed"
    detail = f" ({clean(_v(d.detail), 60)})" if d.detail else ""
    return f"via {clean(_v(d.dispatcher))}: {result}{detail}"


def _approval_resolved(d: ev.ApprovalResolved) -> str:
    verb = "approved" if d.decision == "approve" else "rejected"
    note = f": {clean(_v(d.note), 80)}" if d.note else ""
    return f"gate {clean(_v(d.gate))} {verb} by {clean(_v(d.operator))}{note}"


def _workspace_released(d: ev.WorkspaceReleased) -> str:
    by = "an operator" if d.by_operator else "the lease holder"
    why = f": {clean(_v(d.reason), 80)}" if d.reason else ""
    return f"{clean(_v(d.workspace), 60, keep_end=True)} released by {by}{why}"


def _job_updated(d: ev.JobUpdated) -> str:
    return (f"job {clean(_v(d.job_id))} {_v(d.status)}"
            + (" (reported by its notify token)" if d.reported_by == "notify_token" else "")
            + (f": {clean(_v(d.conclusion), 80)}" if d.conclusion else ""))


_SUMMARIES: dict[type, Summary] = {
    ev.GoalStarted: _started,
    ev.GoalCompleted: lambda d: _ended("completed")(d) + _evidence(d.evidence),
    ev.GoalFailed: _ended("failed"),
    ev.GoalBlocked: _ended("blocked"),
    ev.GoalFinishRequested: lambda d: (f"finish as {_v(d.status)} requested; waits for the host "
                                       "watchdog's cancellation"),
    ev.GoalPaused: lambda d: f"paused until {_short(d.until)} ({clean(_v(d.basis))})",
    ev.GoalStopped: lambda d: f"stopped by {clean(_v(d.operator))}: {clean(_v(d.reason), 100)}",
    ev.GoalRecovered: lambda d: (f"recovered by {clean(_v(d.operator))} from {_v(d.from_status)}/"
                                 f"{d.from_reason or '-'}: {clean(_v(d.reason), 80)}"),
    ev.WorkspaceBound: lambda d: clean(_v(d.workspace), 80, keep_end=True),
    ev.WorkspaceReleased: _workspace_released,
    ev.LeaseAcquired: _lease,
    ev.LeaseTakenOver: _lease,
    ev.LeaseRenewed: lambda d: f"gen {_v(d.generation)} renewed until {_short(d.expires_at)}",
    ev.LeaseReleased: lambda d: f"gen {_v(d.generation)} released",
    ev.LeaseExpired: lambda d: (f"gen {_v(d.generation)} of {clean(_v(d.holder))} expired at "
                                f"{_short(d.expired_at)}"),
    ev.CheckpointRecorded: _checkpoint,
    ev.WakeScheduled: _scheduled,
    ev.WakeCancelRequested: lambda d: (f"{_v(d.backend)} watchdog cancellation requested: "
                                       f"{clean(_v(d.note), 80)}"),
    ev.WakeClaimed: _claimed,
    ev.ReceiptRecorded: _receipt,
    ev.RunReported: _run,
    ev.ContinuationCharged: lambda d: f"continuation {_v(d.attempt)} of {_v(d.max)} charged",
    ev.ContinuationDispatched: _dispatched,
    ev.ApprovalRequested: lambda d: (f"gate {clean(_v(d.gate))}"
                                     + (f": {clean(_v(d.summary), 100)}" if d.summary else "")),
    ev.ApprovalResolved: _approval_resolved,
    ev.JobTracked: lambda d: (f"{clean(_v(d.kind))} {clean(_v(d.ref), 60)} "
                              f"(job {clean(_v(d.job_id))})"),
    ev.LivenessMissed: lambda d: (f"{_v(d.reason)}: {clean(_v(d.detail))} "
                                  f"(deadline {_short(d.deadline)})"),
    ev.JobUpdated: _job_updated,
    ev.ContinuationHostMade: lambda d: (
        f"{clean(_v(d.host))} continued the session itself after the reset of {_short(d.reset)} "
        f"({_v(d.trigger)})"
        + (f", against the resume policy ({_v(d.breaks_policy)})" if d.breaks_policy else "")),
    ev.ContinuationStoodDown: lambda d: (
        f"{clean(_v(d.host))}'s continuation stood down: the reset of {_short(d.reset)} was "
        f"continued already ({_v(d.continued_by)})"),
}

# Never worth a line: digests, and the data a summary already says elsewhere.
_GENERIC_SKIP = frozenset({"token_sha256", "host_ref_sha256", "notify_sha256"})


def summary(kind: str, data: Mapping[str, Any]) -> str:
    """One readable line for an event's stored data, in plain text (no colour,
    no markup).

    The data is decoded into its payload (older shapes upcast) and summarised
    from its attributes. Whatever does not decode (a kind this release does not
    know, a damaged row) falls back to ``key=value`` pairs: a summary never raises.
    """
    data = data if isinstance(data, Mapping) else {}
    payload = decode_or_none(kind, data, partial=True)
    text = _SUMMARIES.get(type(payload))
    if text is not None:
        try:
            return clean(text(payload))
        except (KeyError, TypeError, ValueError, AttributeError):
            pass  # a nested value of an unexpected shape
    return clean(", ".join(f"{k}={v}" for k, v in sorted(data.items())
                           if k not in _GENERIC_SKIP), 160)

# ----------------------------------------------------------------------------- timeline

KIND_WIDTH = 23  # len("continuation.dispatched"), the longest kind
ACTOR_WIDTH = 14


def event_line(seq: int, recorded_at: datetime, kind: str, actor: str,
               data: Mapping[str, Any], *, colour: bool = False) -> str:
    """``seq  time  icon kind  actor  summary``: one line per event."""
    head = f"{FAMILY_ICONS.get(family(kind), '·')} {clean(kind, KIND_WIDTH):<{KIND_WIDTH}}"
    return (f"{seq:>7}  {paint(when(recorded_at), 'dim', colour)}  "
            f"{paint(head, kind_colour(kind), colour)}  "
            f"{clean(actor, ACTOR_WIDTH):<{ACTOR_WIDTH}}  {summary(kind, data)}")


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
        goal.reason or "-",
        f"{state.progress_pct}%",
        f"{clean(lease['holder'], 14)} g{lease['generation']}" if lease else "-",
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
        ("status", status + reason + _paused(state, now)),
        ("progress", f"{_bar(state.progress_pct)} {state.progress_pct} %, "
                     f"{state.checkpoints} checkpoint(s)"),
        ("step", f"“{clean(state.current_step, 120)}”"),
        ("next", _items(state.next_actions, 5) or "-"),
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


def _paused(state: GoalState, now: datetime) -> str:
    if state.status != "paused" or not state.paused_until:
        return ""
    return f", until {when(state.paused_until)} ({relative(state.paused_until, now)})"


def _lease_line(state: GoalState, now: datetime) -> str:
    lease = state.lease
    if not lease:
        ended = f", last one {state.lease_end}" if state.lease_end else ""
        return f"none (generation {state.lease_generation}{ended})"
    via = ", automatic continuation" if lease.get("via") == "wake" else ""
    return (f"{clean(lease['holder'])} gen {lease['generation']}, expires "
            f"{when(lease['expires_at'])} ({relative(lease['expires_at'], now)}), last sign "
            f"of life {relative(lease.get('last_heartbeat_at'), now)}{via}")


def _watchdog_line(state: GoalState, now: datetime) -> str:
    watchdog = state.watchdog
    if not watchdog:
        line = "none"
    else:
        minutes = round(watchdog.get("interval_seconds", 0) / 60, 1)
        line = (f"{watchdog.get('backend', '?')} {watchdog.get('status', '?')} "
                f"({watchdog_health(state)}), every {minutes:g} min")
    due = next_wake_at(state)
    if due:
        line += f"; next wake {when(due)} ({relative(due, now)})"
    if state.ready:
        line += f"; ready for its agent to pull ({state.ready.get('reason', '?')})"
    if state.last_wake:
        wake = state.last_wake
        line += (f"; last wake {wake.get('outcome', '?')} ({wake.get('reason') or '?'}) "
                 f"{relative(wake.get('at'), now)}")
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
    for a pull, and said nothing (issue 38)."""
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
