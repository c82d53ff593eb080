"""Replay and verification: recompute what the events say and compare.

``replay`` folds every goal's events from seq 1 and diffs the result against
the stored projection (``--fix`` rewrites the projection, never the events).
``verify`` recomputes every goal's hash chain and names the first broken link.
Both stream events in (goal, seq) order through the unique index, a batch of
goals at a time, so memory stays flat however long the history is.
"""

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from django.db import transaction

from ledger.chain import Break, StoredLink, first_break
from ledger.domain import Event, fold
from ledger.models import Event as EventRow
from ledger.models import Goal
from ledger.store import projected_columns

BATCH = 500
CHUNK = 5000


@dataclass(frozen=True)
class Difference:
    field: str
    stored: Any
    replayed: Any


@dataclass(frozen=True)
class GoalReport:
    goal_id: str
    differences: list[Difference]
    fixed: bool = False


@dataclass(frozen=True)
class ChainReport:
    goal_id: str
    events: int
    broken: Break | None


def goal_ids(selected: Iterable[str] | None = None) -> list[str]:
    query = Goal.objects.order_by("id")
    if selected:
        query = query.filter(pk__in=list(selected))
    return [str(pk) for pk in query.values_list("id", flat=True)]


def _batches(ids: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(ids), BATCH):
        yield ids[start:start + BATCH]


def _grouped(ids: list[str], *fields: str) -> Iterator[tuple[str, Iterator[tuple]]]:
    rows = (
        EventRow.objects.filter(goal_id__in=ids)
        .order_by("goal_id", "seq")
        .values_list("goal_id", *fields)
        .iterator(chunk_size=CHUNK)
    )
    for goal_id, group in groupby(rows, key=lambda row: row[0]):
        yield str(goal_id), group


def diff_goal(goal: Goal, events: Iterable[tuple]) -> tuple[list[Difference], dict[str, Any]]:
    """Fold ``(kind, data, recorded_at, hash)`` rows and compare with ``goal``.
    Returns the differences and the values a fix would write."""
    head = ""

    def to_event(row: tuple) -> Event:
        nonlocal head
        kind, data, recorded_at, head = row
        return Event(kind, data, recorded_at)

    state = fold(to_event(row) for row in events)
    replayed = {"version": state.version, "last_hash": head, **projected_columns(state)}
    differences = [
        Difference(name, getattr(goal, name), value)
        for name, value in replayed.items()
        if getattr(goal, name) != value
    ]
    stored_state, replayed_state = goal.state or {}, state.to_dict()
    for key in sorted(set(stored_state) | set(replayed_state)):
        if stored_state.get(key) != replayed_state.get(key):
            differences.append(Difference(f"state.{key}", stored_state.get(key),
                                          replayed_state.get(key)))
    return differences, {**replayed, "state": replayed_state}


def replay(ids: list[str], *, fix: bool = False,
           progress: Callable[[int], None] | None = None) -> Iterator[GoalReport]:
    """Yield a report for every goal whose projection differs from its events."""
    for batch in _batches(ids):
        # in_bulk keys are UUIDs; the grouped rows' ids went through str().
        goals = {str(pk): goal for pk, goal in Goal.objects.in_bulk(batch).items()}
        seen = set()
        for goal_id, rows in _grouped(batch, "kind", "data", "recorded_at", "hash"):
            seen.add(goal_id)
            goal = goals[goal_id]
            differences, values = diff_goal(goal, (row[1:] for row in rows))
            if differences and fix:
                _rewrite(goal.pk, values)
            if differences:
                yield GoalReport(goal_id, differences, fixed=fix)
            if progress:
                progress(1)
        for goal_id in set(batch) - seen:
            # A projection row with no events at all cannot be replayed into
            # anything; report it rather than invent a state.
            yield GoalReport(goal_id, [Difference("events", "present", "none")])
            if progress:
                progress(1)


def _rewrite(goal_pk: Any, values: dict[str, Any]) -> None:
    with transaction.atomic():
        # Lock first so a command running meanwhile cannot be overwritten with
        # a projection folded from fewer events than it just appended.
        Goal.objects.select_for_update().filter(pk=goal_pk).values_list("pk").first()
        Goal.objects.filter(pk=goal_pk).update(**values)


def verify(ids: list[str], *,
           progress: Callable[[int], None] | None = None) -> Iterator[ChainReport]:
    """Yield one report per goal, broken or not."""
    for batch in _batches(ids):
        seen = set()
        fields = ("seq", "kind", "data", "actor", "recorded_at", "prev_hash", "hash")
        for goal_id, rows in _grouped(batch, *fields):
            seen.add(goal_id)
            links = (StoredLink(*row[1:]) for row in rows)
            broken, checked, _head = first_break(goal_id, links)
            yield ChainReport(goal_id, checked, broken)
            if progress:
                progress(1)
        for goal_id in set(batch) - seen:
            yield ChainReport(goal_id, 0, Break(1, "the goal has no events"))
            if progress:
                progress(1)

