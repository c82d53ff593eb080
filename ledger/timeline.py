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
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

from django.db import transaction

from ledger import clock
from ledger.chain import event_hash, head_break
from ledger.models import Event, Goal

PAGE = 50
CHART_POINTS = 300
FAMILY_STYLE = {
    # family: (icon, colour)
    "goal": ("◆", "#2f6fde"),
    "checkpoint": ("✔", "#1e8e3e"),
    "lease": ("🔑", "#8a6d00"),
    "wake": ("⏰", "#7b3fe4"),
    "continuation": ("↻", "#7b3fe4"),
    "receipt": ("🧾", "#5f6368"),
    "run": ("⚠", "#d93025"),
    "job": ("⚙", "#5f6368"),
    "approval": ("✋", "#e37400"),
    "workspace": ("📁", "#5f6368"),
}
FAILURE_KINDS = ("run.reported", "goal.paused", "goal.blocked", "goal.failed")
MARKER_KINDS = ("wake.claimed", *FAILURE_KINDS)


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


def chart(goal: Goal, width: int = 640, height: int = 120) -> dict[str, Any]:
    """An inline SVG's points: progress over time, wake and failure markers."""
    recent = list(
        Event.objects.filter(goal=goal, kind__in=("checkpoint.recorded", *MARKER_KINDS))
        .order_by("-seq").values("seq", "kind", "data", "recorded_at")[:CHART_POINTS]
    )[::-1]
    if not recent:
        return {"points": "", "markers": [], "width": width, "height": height}
    start, end = recent[0]["recorded_at"], recent[-1]["recorded_at"]
    span = max((end - start).total_seconds(), 1.0)

    def x(moment: datetime) -> float:
        return round(10 + (width - 20) * (moment - start).total_seconds() / span, 1)

    def y(pct: int) -> float:
        return round(height - 10 - (height - 20) * pct / 100, 1)

    points, markers, pct = [], [], 0
    for row in recent:
        if row["kind"] == "checkpoint.recorded":
            pct = row["data"].get("progress_pct", pct)
            points.append(f"{x(row['recorded_at'])},{y(pct)}")
        else:
            failure = row["kind"] in FAILURE_KINDS
            markers.append({"x": x(row["recorded_at"]), "y": y(pct), "seq": row["seq"],
                            "kind": row["kind"],
                            "colour": "#d93025" if failure else "#7b3fe4"})
    return {"points": " ".join(points), "markers": markers, "width": width, "height": height}


def style(kind: str) -> tuple[str, str]:
    return FAMILY_STYLE.get(kind.partition(".")[0], ("•", "#5f6368"))


# ---------------------------------------------------------------- dashboard

OVERDUE = timedelta(minutes=5)
LIMIT = 50


def stuck_goals() -> list[dict[str, Any]]:
    """Goals needing attention, grouped by why; each group's count and its
    oldest-first goals (bounded)."""
    now = clock.now()
    active = Goal.objects.exclude(status__in=("done", "failed", "stopped"))
    groups = [
        ("Leases expired, no wake due",
         active.filter(lease_expires_at__lt=now, next_wake_at__isnull=True), "lease_expires_at"),
        ("Wakes overdue",
         active.filter(next_wake_at__lt=now - OVERDUE).exclude(status="blocked"),
         "next_wake_at"),
        ("Paused past their reset",
         active.filter(status="paused", paused_until__lt=now - OVERDUE), "paused_until"),
        ("Pending native cleanup", active.filter(reason="PENDING_NATIVE_CLEANUP"), "updated_at"),
    ]
    reasons = (active.filter(status="blocked").values_list("reason", flat=True)
               .order_by("reason").distinct())
    for reason in reasons:
        groups.append((f"Blocked: {reason or 'no reason'}",
                       active.filter(status="blocked", reason=reason), "updated_at"))
    result = []
    for title, query, since_field in groups:
        count = query.count()
        if not count:
            continue
        goals = list(query.order_by(since_field).only(
            "id", "goal_key", "workspace", "agent", "status", "reason", since_field)[:LIMIT])
        result.append({"title": title, "count": count, "goals": [
            {"goal": goal, "since": getattr(goal, since_field),
             "age": now - getattr(goal, since_field) if getattr(goal, since_field) else None}
            for goal in goals]})
    return result
