"""The doctor's passes as stored: what each whole pass (the hourly repair,
`ledger doctor [--fix]` over every goal) found and did, and the newest pass
as the admin's dashboard shows it.

Why stored: checking every active goal's wake rows costs one query per goal
(853 ms at 1,000 goals, 8.3 s at 10,000), and the dashboard used to do it on
every view. The hourly repair does that check anyway; it now keeps what it
found, and the dashboard reads the newest pass — one primary-key read, an
index search of its wake-row findings (at most STORED), primary-key reads of
their goals — and says when that pass ran (docs/decisions.md). A row
deleted behind the ledger's back is on the page within one repair interval,
with what the repair did about it.
"""

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from django.db import transaction

from ledger.models import DoctorFinding, DoctorPass, Goal

# Who ran a pass (the doctor's ``actor``, or the read-only command), as the page says it.
SOURCES = {
    "scheduler": "the hourly repair",
    "operator": "`ledger doctor --fix`",
    "doctor": "`ledger doctor`",
}
KEEP = 48  # passes kept: two days of hourly repairs (older ones are deleted)
STORED = 1000  # findings stored per pass; the pass row counts every one
SCHEDULE = "schedule_"  # the prefix of the wake-row findings (doctor.findings)
# The repair runs hourly: a newest pass older than two intervals means it
# stopped (or the scheduler did), and the page says so.
STALE_AFTER_SECONDS = 2 * 3600


class FindingLike(Protocol):
    goal_id: str
    problem: str
    detail: str
    row: str


def record(source: str, started_at: datetime, finished_at: datetime,
           found: Iterable[FindingLike], *, active: int = 0,
           outcomes: Mapping[str, str] | None = None, repairs: int = 0) -> DoctorPass:
    """Keep a whole pass's findings (at most STORED of them, the counts of
    all) and what was done per goal; forget passes beyond the newest KEEP.
    One transaction: the dashboard sees the pass whole or not at all."""
    found = list(found)
    outcomes = outcomes or {}
    schedule_goals = {f.goal_id for f in found if f.goal_id and f.problem.startswith(SCHEDULE)}
    with transaction.atomic():
        run = DoctorPass.objects.create(
            started_at=started_at, finished_at=finished_at, source=source[:40], active=active,
            found=len(found), schedule_goals=len(schedule_goals), repairs=repairs)
        DoctorFinding.objects.bulk_create(
            [DoctorFinding(run=run, goal=_uuid_or_none(f.goal_id), problem=f.problem[:40],
                           row=f.row[:100], detail=f.detail[:300],
                           outcome=outcomes.get(f.goal_id, "")[:200] if f.goal_id else "")
             for f in found[:STORED]], batch_size=500)
        old = list(DoctorPass.objects.order_by("-id").values_list("id", flat=True)[KEEP:])
        if old:
            DoctorFinding.objects.filter(run_id__in=old).delete()
            DoctorPass.objects.filter(id__in=old).delete()
    return run


def latest() -> DoctorPass | None:
    """The newest pass (a primary-key read: passes are only ever inserted whole)."""
    return DoctorPass.objects.order_by("-id").first()


@dataclass
class WakeRows:
    """The dashboard's "wake rows missing or wrong" group, as of a pass."""

    run: DoctorPass
    count: int  # goals the pass found with a wake row missing or wrong
    goals: list[Goal]  # the oldest of them still in the database, at most ``limit``
    findings: dict[str, list[DoctorFinding]]  # by goal id: what was wrong, what was done
    stale: bool  # the pass is older than STALE_AFTER_SECONDS

    @property
    def by(self) -> str:
        return SOURCES.get(self.run.source, self.run.source)


def wake_rows(now: datetime, limit: int) -> WakeRows | None:
    """The newest pass's wake-row findings: its stored findings of that kind
    (at most STORED, on the (run, problem) index) and the oldest ``limit`` of
    their goals (primary-key searches). Bounded by what a pass stores, never
    by the number of goals; None before any pass."""
    run = latest()
    if run is None:
        return None
    # A range, not startswith: SQLite's LIKE is case-insensitive and seeks no
    # index ("`" follows "_"), so the (run, problem) index is searched.
    rows = list(DoctorFinding.objects.filter(run=run, problem__gte=SCHEDULE,
                                             problem__lt=SCHEDULE[:-1] + "`")
                .order_by("id")[:STORED])
    by_goal: dict[str, list[DoctorFinding]] = {}
    for row in rows:
        by_goal.setdefault(str(row.goal), []).append(row)
    goals = _oldest([row.goal for row in rows if row.goal is not None], limit)
    stale = (now - run.started_at).total_seconds() > STALE_AFTER_SECONDS
    return WakeRows(run, run.schedule_goals, goals, by_goal, stale)


def _oldest(ids: list[Any], limit: int) -> list[Goal]:
    """The oldest ``limit`` goals of ``ids`` (alerts.ORDER): their sort keys
    read by primary key, sorted here, then only those goals read whole. No
    ORDER BY in SQL: with one, a planner may walk the goals in index order
    and test each against the list — a read of every goal."""
    keys = sorted(Goal.objects.filter(pk__in=set(ids)).values_list("created_at", "id"))
    chosen = [pk for _, pk in keys[:limit]]
    found = {goal.pk: goal for goal in Goal.objects.filter(pk__in=chosen)}
    return [found[pk] for pk in chosen if pk in found]


def _uuid_or_none(goal_id: str) -> uuid.UUID | None:
    """The finding's goal as a UUID; None for the scheduler's own problems and
    for an orphaned row whose name holds no goal id (its row name says which)."""
    try:
        return uuid.UUID(goal_id) if goal_id else None
    except ValueError:
        return None
