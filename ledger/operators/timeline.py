"""What the admin's goal timeline and stuck-goals dashboard show, computed
from the projection and bounded slices of the history.

Every query here is bounded by an index and a LIMIT, whatever the length of a
goal's history: a page is a keyset slice of (goal, seq); the chart reads at
most CHART_POINTS recent events; the chain badge checks the page it shows
and, on the newest page, that the chain ends at the goal row's version and
head hash, as ``ledger verify`` does (a full verification is an explicit
request).
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

from django.db import transaction
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from ledger.domain import TERMINAL_STATUSES, liveness
from ledger.domain.codec import decode_or_none
from ledger.domain.kinds import (
    CHECKPOINT_RECORDED,
    GOAL_BLOCKED,
    GOAL_COMPLETED,
    GOAL_FAILED,
    GOAL_PAUSED,
    GOAL_RECOVERED,
    GOAL_STOPPED,
    LEASE_ACQUIRED,
    LEASE_TAKEN_OVER,
    PAYLOADS,
    WAKE_CLAIMED,
    CheckpointRecorded,
    GoalBlocked,
    GoalPaused,
    RunReported,
    style_of,
)
from ledger.domain.state import BLOCKED, RATE_LIMIT_STOPPED
from ledger.eventstore import clock, tallies
from ledger.eventstore.chain import event_hash, head_break
from ledger.models import Event, Goal
from ledger.operators import passes
from ledger.operators.summaries import summary
from ledger.services import alerts

PAGE = 50
CHART_POINTS = 300

# Each look's icon (a kind's ``STYLE.look``, its family: inline SVG drawn in
# white on the look's colour: no emoji, which Debian's Chromium shows as empty
# boxes without an emoji font) and its colour. Shapes after Feather icons
# (MIT), 24x24 strokes.
FAMILY_STYLE: dict[str, tuple[str, str, str]] = {
    # look: (title, colour, SVG body)
    "goal": ("goal", "#2f6fde",
             '<path d="M4 15s1-1 4-1 5 2 8 2 4-1 4-1V3s-1 1-4 1-5-2-8-2-4 1-4 1z"/>'
             '<line x1="4" y1="22" x2="4" y2="15"/>'),
    "checkpoint": ("checkpoint", "#1e8e3e", '<polyline points="20 6 9 17 4 12"/>'),
    "lease": ("lease", "#8a6d00",
              '<circle cx="7.5" cy="15.5" r="4.5"/><path d="M10.7 12.3 21 2"/>'
              '<path d="m16 7 3 3"/><path d="m18.5 4.5 2.5 2.5"/>'),
    "wake": ("wake", "#7b3fe4",
             '<circle cx="12" cy="13" r="8"/><polyline points="12 9 12 13 15 15"/>'
             '<path d="M5 3 2 6"/><path d="m22 6-3-3"/>'),
    "continuation": ("continuation", "#7b3fe4",
                     '<polyline points="23 4 23 10 17 10"/>'
                     '<path d="M20.49 15a9 9 0 1 1-2.13-9.36L23 10"/>'),
    "receipt": ("receipt", "#5f6368",
                '<path d="M14 2H6a2 2 0 0 0-2 2v16a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2V8z"/>'
                '<polyline points="14 2 14 8 20 8"/><line x1="8" y1="13" x2="16" y2="13"/>'
                '<line x1="8" y1="17" x2="16" y2="17"/>'),
    "run": ("run report", "#d93025", '<polyline points="22 12 18 12 15 21 9 3 6 12 2 12"/>'),
    "job": ("job", "#5f6368",
            '<rect x="4" y="4" width="16" height="16" rx="2"/><rect x="9" y="9" width="6" '
            'height="6"/><path d="M9 1v3M15 1v3M9 20v3M15 20v3M20 9h3M20 14h3M1 9h3M1 14h3"/>'),
    "approval": ("approval", "#e37400",
                 '<path d="M12 22s8-4 8-10V5l-8-3-8 3v7c0 6 8 10 8 10z"/>'
                 '<polyline points="9 12 11 14 15 10"/>'),
    "liveness": ("missed deadline", "#d93025",
                 '<path d="M10.3 3.9 1.8 18a2 2 0 0 0 1.7 3h17a2 2 0 0 0 1.7-3L13.7 3.9a2 2 0 0 '
                 '0-3.4 0z"/><line x1="12" y1="9" x2="12" y2="13"/><line x1="12" y1="17" '
                 'x2="12.01" y2="17"/>'),
    "clock": ("clock corrected", "#e37400",
              '<circle cx="12" cy="12" r="10"/><polyline points="12 6 12 12 8 14"/>'),
    "workspace": ("workspace", "#5f6368",
                  '<path d="M22 19a2 2 0 0 1-2 2H4a2 2 0 0 1-2-2V5a2 2 0 0 1 2-2h5l2 3h9a2 2 0 0 '
                  '1 2 2z"/>'),
}
OTHER_STYLE = ("event", "#5f6368", '<circle cx="12" cy="12" r="4"/>')

# Chart markers by name (a kind's ``STYLE.marker``): (colour, legend label);
# a run report is a marker only when it reports an error.
MARKERS = {
    "wake": ("#7b3fe4", "wake claimed"),
    "pause": ("#e37400", "paused (rate limit)"),
    "failure": ("#d93025", "run error, blocked or failed"),
}
MARKER_KINDS = tuple(payload.KIND for payload in PAYLOADS if payload.STYLE.marker)
# What ends a pause on the chart: the next lease or wake that resumed the goal
# (else the chart's end: now, or the goal's end once terminal).
RESUME_KINDS = (LEASE_ACQUIRED, LEASE_TAKEN_OVER, WAKE_CLAIMED)
PAUSE_COLOUR = "#e37400"
# Checkpoints closer than this many pixels (recorded in the same second, on
# any span longer than a few minutes) are drawn this far apart, in order,
# so that each stays visible instead of stacking on one vertical.
CHECKPOINT_GAP = 4.0


@dataclass
class TimelinePage:
    events: list[Event]
    newer: int | None  # the `after` cursor for the newer page, if any
    older: int | None  # the `before` cursor for the older page, if any
    chain_ok: bool
    broken_at: int | None


def page(goal: Goal, *, before: int | None = None, after: int | None = None) -> TimelinePage:
    """Newest first, PAGE events, keyset-paginated on the (goal, seq) index."""
    events = Event.objects.filter(goal=goal)
    if after is not None:
        rows = list(events.filter(seq__gt=after).order_by("seq")[:PAGE])[::-1]
    else:
        top = before if before is not None else goal.version + 1
        rows = list(events.filter(seq__lt=top).order_by("-seq")[:PAGE])
    newer = rows[0].seq if rows and rows[0].seq < goal.version else None
    older = rows[-1].seq if rows and rows[-1].seq > 1 else None
    broken = _first_break_on_page(goal, rows)
    if broken is None and (newer is None or (before is None and after is None)):
        # The page that should end at the head: where truncation shows.
        broken = _head_break(goal, rows)
    return TimelinePage(rows, newer, older, broken is None, broken)


def _first_break_on_page(goal: Goal, rows: list[Event]) -> int | None:
    """Recompute the hashes of the events shown and their links to each other."""
    ordered = sorted(rows, key=lambda e: e.seq)
    for event in ordered:
        digest = event_hash(event.prev_hash, str(goal.pk), event.seq, event.kind, event.data,
                            event.actor, event.recorded_at)
        if digest != event.hash:
            return event.seq
    for previous, current in pairwise(ordered):
        if current.prev_hash != previous.hash:
            return current.seq
    return None


def _head_break(goal: Goal, rows: list[Event]) -> int | None:
    """On the newest page, the same check as ``ledger verify``'s: the chain
    ends at the goal row's version with the goal row's head hash.

    ``goal`` was read before its events, so a command committing meanwhile
    can only add events past ``goal.version``; those are looked at again
    under the goal's row lock (two indexed lookups) before a break is shown."""
    newest = max(rows, key=lambda e: e.seq, default=None)
    last_seq = newest.seq if newest else 0
    at_version = newest.hash if newest and newest.seq == goal.version else None
    beyond = (Event.objects.filter(goal=goal, seq__gt=goal.version).order_by("-seq")
              .values_list("seq", flat=True).first())
    if beyond is None:
        broken = head_break(goal.version, goal.last_hash, last_seq, at_version)
        return broken.seq if broken else None
    with transaction.atomic():
        version, last_hash = Goal.objects.select_for_update().filter(pk=goal.pk).values_list(
            "version", "last_hash").get()
        last = (Event.objects.filter(goal=goal).order_by("-seq")
                .values_list("seq", "hash").first()) or (0, None)
        at = (Event.objects.filter(goal=goal, seq=version).values_list("hash", flat=True)
              .first())
    broken = head_break(version, last_hash, last[0], at)
    return broken.seq if broken else None


# The chart's geometry: a plot area inside margins for the axes' labels.
CHART_WIDTH, CHART_HEIGHT = 720, 220
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 48, 24, 12, 34
# Candidate distances between time ticks, the smallest giving at most MAX_TICKS.
TICK_STEPS = [timedelta(seconds=s) for s in (
    0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800,
    21600, 43200, 86400, 2 * 86400, 7 * 86400, 14 * 86400, 30 * 86400, 90 * 86400, 365 * 86400)]
MAX_TICKS = 6
MIN_SPAN = timedelta(seconds=1)  # a goal started a moment ago still gets an axis


def chart(goal: Goal) -> dict[str, Any]:
    """An inline SVG's geometry: progress (a step line: it holds between
    checkpoints) over the goal's own life, from its start (or from the oldest
    of the CHART_POINTS events read, on a long history) to now, or to its end
    once terminal; wake and failure markers; pauses as shaded spans (read with
    the leases and wakes that end them); time and percent axes."""
    recent = list(
        Event.objects.filter(goal=goal, kind__in=(CHECKPOINT_RECORDED, *MARKER_KINDS,
                                                  *RESUME_KINDS))
        .order_by("-seq").values("seq", "kind", "data", "recorded_at")[:CHART_POINTS]
    )[::-1]
    whole_life = len(recent) < CHART_POINTS
    start = goal.created_at if whole_life or not recent else recent[0]["recorded_at"]
    end = goal.updated_at if goal.status in TERMINAL_STATUSES else max(clock.now(),
                                                                        goal.updated_at)
    end = max(end, start + MIN_SPAN)
    span = (end - start).total_seconds()
    left, right = MARGIN_LEFT, CHART_WIDTH - MARGIN_RIGHT
    top, bottom = MARGIN_TOP, CHART_HEIGHT - MARGIN_BOTTOM

    def x(moment: datetime) -> float:
        return round(left + (right - left) * (moment - start).total_seconds() / span, 1)

    def y(pct: int | float) -> float:
        return round(bottom - (bottom - top) * pct / 100, 1)

    series = _series(recent, x, y, whole_life, left, right)
    legend = [{"colour": colour, "label": label}
              for colour, label in dict.fromkeys(MARKERS.values())]
    return {
        "width": CHART_WIDTH, "height": CHART_HEIGHT,
        "left": left, "right": right, "top": top, "bottom": bottom,
        **series, "pause_colour": PAUSE_COLOUR, "plot_height": bottom - top,
        "x_ticks": time_ticks(start, end, x),
        "y_ticks": [{"y": y(p), "label": f"{p} %"} for p in (0, 25, 50, 75, 100)],
        "start": start, "end": end, "ends_now": goal.status not in TERMINAL_STATUSES,
        "legend": legend,
    }


def _series(recent: list[dict[str, Any]], x: Any, y: Any, whole_life: bool, left: int,
            right: int) -> dict[str, Any]:
    """The chart's progress step line, its markers, checkpoints and pause spans."""
    pct = 0 if whole_life else None
    points = [f"{left},{y(0)}"] if whole_life else []
    markers, checkpoints, pauses = [], [], []
    paused_at: dict[str, Any] | None = None  # the goal.paused row of an open pause
    last_x = float(left) - CHECKPOINT_GAP
    for row in recent:
        at = x(row["recorded_at"])
        kind = row["kind"]
        if kind == GOAL_PAUSED and paused_at is None:
            paused_at = row
        elif kind in RESUME_KINDS and paused_at is not None:
            pauses.append(_pause_span(paused_at, x(paused_at["recorded_at"]), at))
            paused_at = None
        if kind in RESUME_KINDS and kind not in MARKER_KINDS:
            continue  # read only to end a pause
        payload = decode_or_none(kind, row["data"], partial=True)
        if isinstance(payload, CheckpointRecorded):
            # Never left of (or on) the previous checkpoint: same-second
            # checkpoints step right by CHECKPOINT_GAP, within the plot.
            at = round(min(max(at, last_x + CHECKPOINT_GAP), right), 1)
            last_x = at
            if pct is not None:
                points.append(f"{at},{y(pct)}")
            pct = payload.progress_pct if payload.progress_pct is not None else pct or 0
            points.append(f"{at},{y(pct)}")
            checkpoints.append({"x": at, "y": y(pct), "seq": row["seq"], "pct": pct})
        elif not isinstance(payload, RunReported) or payload.outcome == "error":
            # A marker kind (MARKER_KINDS) names its marker in its style.
            colour, label = MARKERS[style_of(kind).marker]  # type: ignore[union-attr]
            markers.append({"x": at, "y": y(pct or 0), "seq": row["seq"], "kind": row["kind"],
                            "colour": colour, "label": label})
    if paused_at is not None:  # still paused, or ended while paused: to the chart's end
        pauses.append(_pause_span(paused_at, x(paused_at["recorded_at"]), right))
    if pct is not None:
        points.append(f"{right},{y(pct)}")
    return {"points": " ".join(points), "markers": markers, "checkpoints": checkpoints,
            "pauses": pauses}


def _pause_span(row: dict[str, Any], start_x: float, end_x: float) -> dict[str, Any]:
    """A shaded band from the pause to its end, at least 2 px wide to be seen."""
    return {"x": start_x, "width": round(max(end_x - start_x, 2.0), 1), "seq": row["seq"],
            "until": str(getattr(decode_or_none(row["kind"], row["data"], partial=True),
                                 "until", None) or "")}


# The header's interruptions: each rate limit (a pause, or the block once the
# continuation budget is spent) and each recovery, newest INTERRUPTIONS.
INTERRUPTION_KINDS = (GOAL_PAUSED, GOAL_RECOVERED, GOAL_BLOCKED)
INTERRUPTIONS = 20
ENDING_KINDS = (GOAL_COMPLETED, GOAL_FAILED, GOAL_STOPPED)


def header(goal: Goal) -> dict[str, Any]:
    """What the top of the page says without scrolling to the last event: how
    a terminal goal ended (its summary and, when completed, each criterion's
    evidence) and a line per rate limit, pause and recovery with its reset.
    Two bounded queries on the (goal, seq) index, newest first."""
    ending = None
    if goal.status in TERMINAL_STATUSES:
        row = (Event.objects.filter(goal=goal, kind__in=ENDING_KINDS).order_by("-seq")
               .values("seq", "kind", "data", "recorded_at").first())
        if row is not None:
            end = decode_or_none(row["kind"], row["data"], partial=True)
            items = getattr(end, "evidence", None)
            ending = {**row, "summary": str(getattr(end, "summary", None) or ""),
                      "reason": str(getattr(end, "reason", None) or ""),
                      "evidence": [i for i in items if isinstance(i, dict)]
                      if isinstance(items, list) else []}
    rows = list(Event.objects.filter(goal=goal, kind__in=INTERRUPTION_KINDS)
                .order_by("-seq").values("seq", "kind", "data", "recorded_at")
                [:INTERRUPTIONS + 1])
    lines = []
    for row in rows[:INTERRUPTIONS][::-1]:
        data = row["data"]
        payload = decode_or_none(row["kind"], data, partial=True)
        if isinstance(payload, GoalBlocked) and payload.reason != RATE_LIMIT_STOPPED:
            continue  # other blocks are the status badge's, not a rate limit's
        label = ("rate limit, paused" if row["kind"] == GOAL_PAUSED
                 else "rate limit, blocked" if row["kind"] == GOAL_BLOCKED else "recovered")
        paused = payload if isinstance(payload, GoalPaused) else None
        until = str(paused.until or "") if paused else ""
        lines.append({"seq": row["seq"], "kind": row["kind"], "label": label,
                      "at": row["recorded_at"], "until": until,
                      # A pause's summary would repeat its reset: say its basis.
                      "text": str(paused.basis or "") if paused
                      else summary(row["kind"], data)})
    return {"ending": ending, "interruptions": lines,
            "more_interruptions": len(rows) > INTERRUPTIONS}


def time_ticks(start: datetime, end: datetime, x: Any) -> list[dict[str, Any]]:
    """Ticks at round times (UTC) between start and end, labelled as
    precisely as their spacing needs."""
    span = end - start
    step = next((s for s in TICK_STEPS if span / s <= MAX_TICKS), TICK_STEPS[-1])
    if step < timedelta(seconds=1):
        fmt = "%H:%M:%S.%f"
    elif step < timedelta(minutes=1):
        fmt = "%H:%M:%S"
    elif step < timedelta(days=1):
        fmt = "%H:%M" if span < timedelta(days=1) else "%b %d %H:%M"
    else:
        fmt = "%b %d"
    epoch = datetime(2000, 1, 1, tzinfo=UTC)  # a Saturday midnight: days and hours round
    first = epoch + step * -((epoch - start.astimezone(UTC)) // step)
    ticks, moment = [], first
    while moment <= end:
        label = moment.astimezone(UTC).strftime(fmt)
        ticks.append({"x": x(moment), "label": label[:-5] if fmt.endswith("%f") else label})
        moment += step
    return ticks


def style(kind: str) -> tuple[str, str, str]:
    """(title, colour, SVG body) of the look the kind names (a kind this
    release does not know: its family's, else a plain dot)."""
    named = style_of(kind)
    return FAMILY_STYLE.get(named.look if named else kind.partition(".")[0], OTHER_STYLE)


def icon(kind: str) -> SafeString:
    title, colour, body = style(kind)
    return format_html(
        # The colour is a rect's fill, not a style attribute: the
        # Content-Security-Policy refuses inline style attributes.
        '<svg class="wl-icon" viewBox="-4 -4 32 32" width="30" height="30" role="img" '
        'aria-label="{} event" data-family="{}"><title>{} event</title>'
        '<rect x="-4" y="-4" width="32" height="32" rx="6" fill="{}"/>'
        '<g fill="none" stroke="#fff" stroke-width="2" stroke-linecap="round" '
        'stroke-linejoin="round">{}</g></svg>',
        title, kind.partition(".")[0], title, colour, mark_safe(body))  # noqa: S308 (constants)


# ---------------------------------------------------------------- dashboard

LIMIT = 50  # goals a dashboard group shows; its count and a link cover the rest
SCHEDULE_ROWS = "SCHEDULE_ROWS"  # the group of the doctor's wake-row findings


def stuck_goals(checked: passes.WakeRows | None = None) -> list[dict[str, Any]]:
    """Goals needing attention, grouped by why (the /alerts query: one truth,
    ``ledger.domain.liveness``), and the goals whose wake rows the newest
    doctor pass found missing or wrong (``checked``: ``passes.wake_rows``,
    as of that pass, not re-checked here); each group's count (SQL, over
    every goal, or the pass's own count), what to do, its oldest goals (at
    most LIMIT) and, when it has more, where the rest are. Every statement
    is an indexed read bounded by what is shown (tests/*/test_scale_plans.py)."""
    now = clock.now()
    everyone = Goal.objects.all()
    groups: dict[str, tuple[int, list[Goal], str]] = {}
    for reason, count in alerts.counts_by_reason(everyone, now).items():
        shown = list(alerts.of_reason(everyone, reason, now)[:LIMIT])
        groups[reason] = (count, shown, f"?needs_human={reason}")
    if checked is not None and checked.count:
        groups[SCHEDULE_ROWS] = (checked.count, checked.goals, "")
    result = []
    for reason in sorted(groups):
        count, shown, rest = groups[reason]
        items = []
        for goal in shown:
            if reason == SCHEDULE_ROWS and checked is not None:
                # Since the pass that found it: when the check ran, not when the row went.
                since = checked.run.started_at
                found = checked.findings.get(str(goal.pk), [])
            else:
                row = alerts.row(goal, now)
                since = datetime.fromisoformat(row["since"]) if row["since"] else goal.updated_at
                found = []
            items.append({"goal": goal, "since": since, "age": now - since, "found": found})
        title = (f"Blocked: {reason}" if items and items[0]["goal"].status == BLOCKED
                 and reason != SCHEDULE_ROWS
                 else "Wake rows missing or wrong (ledger doctor --fix)"
                 if reason == SCHEDULE_ROWS else reason)
        result.append({"title": title, "reason": reason, "count": count, "goals": items,
                       "more": count - len(items), "rest": rest,
                       "why": "" if reason == SCHEDULE_ROWS else liveness.why(reason),
                       "checked": checked if reason == SCHEDULE_ROWS else None})
    return result


def active_goals() -> int:
    """How many goals are active now (the dashboard sets it beside a pass's
    count "then"): the goals_active tally's rows, which the store moves in
    each command's transaction, not a COUNT over every goal."""
    return int(sum(tallies.read().get(tallies.ACTIVE, {}).values()))
