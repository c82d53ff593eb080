"""Replay and verification: recompute what the events say and compare.

``replay`` folds every goal's events from seq 1 and diffs the result against
the stored projection (``--fix`` rewrites the projection, never the events).
``verify`` recomputes every goal's hash chain, checks that it ends where the
goal row says it does (``version``, ``last_hash``) and names the first broken
link.
Both stream events in (goal, seq) order through the unique index, a batch of
goals at a time, so memory stays flat however long the history is.
"""

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from django.db import DatabaseError, transaction

from ledger import failpoints
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
    """Yield a report for every goal whose projection differs from its events.

    The first pass reads without locks. A goal row and its events are two
    reads, so a command committing between them makes a difference that is not
    there; every difference is therefore confirmed (and with ``fix`` repaired)
    under the goal's row lock, from events read again under that lock."""
    for batch in _batches(ids):
        # in_bulk keys are UUIDs; the grouped rows' ids went through str().
        goals = {str(pk): goal for pk, goal in Goal.objects.in_bulk(batch).items()}
        seen = set()
        for goal_id, rows in _grouped(batch, "kind", "data", "recorded_at", "hash"):
            seen.add(goal_id)
            differences, _ = diff_goal(goals[goal_id], (row[1:] for row in rows))
            if differences:
                report = _confirm(goal_id, fix=fix)
                if report is not None:
                    yield report
            if progress:
                progress(1)
        for goal_id in set(batch) - seen:
            # A projection row with no events at all cannot be replayed into
            # anything; report it rather than invent a state.
            yield GoalReport(goal_id, [Difference("events", "present", "none")])
            if progress:
                progress(1)


def _confirm(goal_id: str, *, fix: bool) -> GoalReport | None:
    """Fold the goal's events again while holding its row lock (no command can
    append meanwhile) and, with ``fix``, rewrite the projection from that fold.
    The write is also conditional on the locked version: a projection is never
    overwritten with one folded from fewer events than the goal has."""
    with transaction.atomic():
        goal = Goal.objects.select_for_update().filter(pk=goal_id).first()
        if goal is None:
            return None
        rows = (EventRow.objects.filter(goal_id=goal_id).order_by("seq")
                .values_list("kind", "data", "recorded_at", "hash").iterator(chunk_size=CHUNK))
        differences, values = diff_goal(goal, rows)
        if not differences:
            return None
        if fix:
            written = Goal.objects.filter(pk=goal_id, version=goal.version).update(**values)
            if written != 1:
                raise DatabaseError(f"goal {goal_id} changed under its row lock")
            failpoints.reached("replay.before_commit")
        return GoalReport(goal_id, differences, fixed=fix)


def verify(ids: list[str], *,
           progress: Callable[[int], None] | None = None) -> Iterator[ChainReport]:
    """Yield one report per goal, broken or not.

    Each chain is checked link by link and then against the goal row's record
    of where it ends (``version``, ``last_hash``), so events removed from the
    end of a chain are found too. The goal rows are read before their events:
    a command committing in between can only add events past the recorded
    version, never remove any, so only that case is read again under the
    goal's row lock before it is reported."""
    fields = ("seq", "kind", "data", "actor", "recorded_at", "prev_hash", "hash")
    for batch in _batches(ids):
        heads = {str(pk): (version, last_hash) for pk, version, last_hash in
                 Goal.objects.filter(pk__in=batch).values_list("id", "version", "last_hash")}
        seen = set()
        for goal_id, rows in _grouped(batch, *fields):
            seen.add(goal_id)
            version, last_hash = heads[goal_id]
            links = (StoredLink(*row[1:]) for row in rows)
            broken, checked, _head = first_break(goal_id, links, version=version,
                                                 last_hash=last_hash)
            if broken and broken.seq == version + 1 and checked > version:
                broken, checked = _verify_locked(goal_id)
            yield ChainReport(goal_id, checked, broken)
            if progress:
                progress(1)
        for goal_id in set(batch) - seen:
            yield ChainReport(goal_id, 0, Break(1, "the goal has no events"))
            if progress:
                progress(1)


def _verify_locked(goal_id: str) -> tuple[Break | None, int]:
    """The whole chain and its head again, with the goal row locked."""
    with transaction.atomic():
        version, last_hash = Goal.objects.select_for_update().filter(pk=goal_id).values_list(
            "version", "last_hash").get()
        rows = (EventRow.objects.filter(goal_id=goal_id).order_by("seq")
                .values_list("seq", "kind", "data", "actor", "recorded_at", "prev_hash", "hash")
                .iterator(chunk_size=CHUNK))
        broken, checked, _head = first_break(goal_id, (StoredLink(*row) for row in rows),
                                             version=version, last_hash=last_hash)
    return broken, checked
