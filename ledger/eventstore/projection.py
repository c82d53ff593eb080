"""Replay and verification: recompute what the events say and compare.

``replay`` folds every goal's events from seq 1 and diffs the result against
the stored projection (``--fix`` rewrites the projection, never the events).
``verify`` recomputes every goal's hash chain, checks that it ends where the
goal row says it does (``version``, ``last_hash``) and names the first broken
link.
Both stream events in (goal, seq) order through the unique index, a batch of
goals at a time, so memory stays flat however long the history is.

Events are read with the driver's own cursor (``_rows``), not the ORM: for
every row the ORM builds a converter chain (UUID, JSONField.from_db_value,
the SQLite datetime regex, time-zone attachment) that cost more than folding
the event. Here a row costs one ``json.loads`` and, on SQLite, one
``datetime.fromisoformat`` of the stored text; PostgreSQL's driver already
returns aware datetimes. PostgreSQL reads through a server-side cursor
(Django's ``chunked_cursor``, as ``.iterator()`` does), SQLite steps its
statement as rows are fetched: both ``fetchmany(CHUNK)``, so neither holds a
long goal in memory.
"""

import json
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby
from operator import itemgetter
from typing import Any

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction

from ledger.domain import Event, fold
from ledger.domain.state import JSON_DEFAULTS
from ledger.eventstore import failpoints, tallies
from ledger.eventstore.chain import Break, StoredLink, first_break
from ledger.eventstore.store import projected_columns
from ledger.models import Event as EventRow
from ledger.models import Goal

BATCH = 500
CHUNK = 2000
GOAL_CHUNK = 50

# The columns each reader needs, in the order its rows carry them.
REPLAY_FIELDS = ("kind", "data", "recorded_at", "hash")
VERIFY_FIELDS = ("seq", "kind", "data", "actor", "recorded_at", "prev_hash", "hash")


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


def _pk(conn: Any, goal_id: str) -> Any:
    # What UUIDField.get_db_prep_value stores: 32 hex digits on SQLite.
    return uuid.UUID(goal_id) if conn.features.has_native_uuid_field else \
        uuid.UUID(goal_id).hex


def _key(conn: Any, goal_id: str) -> str:
    """The goal id as ``_rows`` returns it: the stored hex on SQLite, the
    canonical text on PostgreSQL (``goal_id::text``: no UUID object a row)."""
    return str(uuid.UUID(goal_id)) if conn.features.has_native_uuid_field else \
        uuid.UUID(goal_id).hex


def _sqlite_time(text: str) -> datetime:
    # Django stores an aware datetime on SQLite as its UTC wall time,
    # "YYYY-MM-DD HH:MM:SS[.ffffff]", and reads it back as UTC.
    try:
        return datetime.fromisoformat(text + "+00:00")
    except ValueError:  # not that shape: Django's own parser decides
        return EventRow._meta.get_field("recorded_at").to_python(text)


# Per vendor: how ``recorded_at`` is selected, and how that value becomes the
# aware datetime the ORM would return.
#  - SQLite: a bare datetime column goes through the converter Django
#    registers with the sqlite3 module (a regex); a cast hands back the text.
#  - PostgreSQL: Django's timestamptz loader is pure Python; to_json writes
#    ISO 8601 whatever the session's DateStyle, and fromisoformat is C.
_TIME_SQL = {"sqlite": "CAST(recorded_at AS TEXT)",
             "postgresql": "to_json(recorded_at) #>> '{}'"}
_TIME_PARSE = {"sqlite": _sqlite_time, "postgresql": datetime.fromisoformat}
_KEY_SQL = {"postgresql": "goal_id::text"}


def _decoder(conn: Any, fields: tuple[str, ...]) -> Callable[[tuple], tuple]:
    """A driver row ``(goal_id, *fields)`` -> ``fields`` as the ORM returns
    them: ``data`` decoded, ``recorded_at`` an aware datetime."""
    loads = json.loads
    when = _TIME_PARSE.get(conn.vendor, _identity)
    if fields == REPLAY_FIELDS:
        return lambda r: (r[1], loads(r[2]), when(r[3]), r[4])
    if fields == VERIFY_FIELDS:
        return lambda r: (r[1], r[2], loads(r[3]), r[4], when(r[5]), r[6], r[7])
    convert = [loads if f == "data" else when if f == "recorded_at" else _identity
               for f in fields]
    return lambda r: tuple(c(v) for c, v in zip(convert, r[1:], strict=True))


def _identity(value: Any) -> Any:
    return value


def _rows(ids: list[str], fields: tuple[str, ...]) -> Iterator[tuple]:
    """``(goal key, *fields)`` driver rows of the goals ``ids`` (``_key``), in
    (goal, seq) order, CHUNK rows a fetch. Column names and SQL come from this
    module, never from input."""
    conn = connections[DEFAULT_DB_ALIAS]
    columns = ", ".join((_KEY_SQL.get(conn.vendor, "goal_id"), *(
        _TIME_SQL.get(conn.vendor, f) if f == "recorded_at" else f for f in fields)))
    if conn.vendor == "sqlite":
        # The driver's own cursor and parameter style, as the store does.
        conn.ensure_connection()
        cursor, p = conn.connection.cursor(), "?"
    elif conn.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS"):
        # Behind a transaction-pooling PgBouncer: fetched whole, as Django's
        # QuerySet.iterator() is then (docs/deploy.md).
        cursor, p = conn.cursor(), "%s"
    else:
        # A server-side cursor (WITH HOLD outside a transaction), as
        # QuerySet.iterator() uses: a long goal never sits in client memory.
        cursor, p = conn.chunked_cursor(), "%s"
    sql = (f"SELECT {columns} FROM {EventRow._meta.db_table} "  # noqa: S608 (no input)
           f"WHERE goal_id IN ({', '.join([p] * len(ids))}) ORDER BY goal_id, seq")
    try:
        with conn.wrap_database_errors:
            cursor.execute(sql, [_pk(conn, i) for i in ids])
            while chunk := cursor.fetchmany(CHUNK):
                yield from chunk
    finally:
        with conn.wrap_database_errors:
            cursor.close()


def _decoded(ids: list[str], fields: tuple[str, ...]) -> Iterator[tuple]:
    """One goal's rows as ``fields``, decoded."""
    return map(_decoder(connections[DEFAULT_DB_ALIAS], fields), _rows(ids, fields))


def _grouped(ids: list[str], *fields: str) -> Iterator[tuple[str, Iterator[tuple]]]:
    """``(goal_id, rows of fields)`` per goal of ``ids`` that has events, in order."""
    conn = connections[DEFAULT_DB_ALIAS]
    canonical = {_key(conn, i): i for i in ids}
    decode = _decoder(conn, fields)
    for key, group in groupby(_rows(ids, fields), key=itemgetter(0)):
        yield canonical[key], map(decode, group)


def diff_goal(goal: Goal, events: Iterable[tuple]) -> tuple[list[Difference], dict[str, Any]]:
    """Fold ``(kind, data, recorded_at, hash)`` rows and compare with ``goal``.
    Returns the differences and the values a fix would write."""
    last: list[str] = [""]

    def folded() -> Iterator[Event]:
        row = None
        for row in events:
            # The one place a stored event is read back: decoded (and upcast)
            # into its payload; the stored JSON itself is only ever hashed.
            yield Event.stored(row[0], row[1], row[2])
        if row is not None:
            last[0] = row[3]

    state = fold(folded())
    replayed = {"version": state.version, "last_hash": last[0], **projected_columns(state)}
    differences = [
        Difference(name, getattr(goal, name), value)
        for name, value in replayed.items()
        if getattr(goal, name) != value
    ]
    # Stored, a state leaves out its fields at their defaults (to_stored);
    # compared field by field with the defaults filled in, so an older row
    # stored in full is no difference, and a key no field has still is.
    stored_state, replayed_state = goal.state or {}, state.to_dict()
    for key in sorted(set(stored_state) | set(replayed_state)):
        stored_value = stored_state.get(key, JSON_DEFAULTS.get(key))
        if stored_value != replayed_state.get(key):
            differences.append(Difference(f"state.{key}", stored_state.get(key),
                                          replayed_state.get(key)))
    return differences, {**replayed, "state": state.to_stored()}


def replay(ids: list[str], *, fix: bool = False,
           progress: Callable[[int], None] | None = None) -> Iterator[GoalReport]:
    """Yield a report for every goal whose projection differs from its events.

    The first pass reads without locks. A goal row and its events are two
    reads, so a command committing between them makes a difference that is not
    there; every difference is therefore confirmed (and with ``fix`` repaired)
    under the goal's row lock, from events read again under that lock.

    A fix that rewrote a status or a reason ends with the goals-by-status
    tallies recounted (``tallies.recount``, one GROUP BY): each rewrite moved
    them from the stored status to the replayed one, which is right when the
    store wrote the wrong projection, but a row edited by hand had never
    moved them, and only a count knows which."""
    moved = False
    for batch in _batches(ids):
        goal_of = _in_step(batch)
        seen = set()
        for goal_id, rows in _grouped(batch, *REPLAY_FIELDS):
            seen.add(goal_id)
            goal = goal_of(goal_id)
            differences = diff_goal(goal, rows)[0] if goal is not None else None
            if differences:
                report = _confirm(goal_id, fix=fix)
                if report is not None:
                    moved |= report.fixed and any(
                        d.field in ("status", "reason") for d in report.differences)
                    yield report
            if progress:
                progress(1)
        for goal_id in set(batch) - seen:
            # A projection row with no events at all cannot be replayed into
            # anything; report it rather than invent a state.
            yield GoalReport(goal_id, [Difference("events", "present", "none")])
            if progress:
                progress(1)
    if moved:
        tallies.recount()


def _in_step(batch: list[str]) -> Callable[[str], Goal | None]:
    """The batch's goal rows, read in the order their events stream (both by
    the stored id), a few at a time: a whole batch of decoded projections
    held at once was most of replay's memory, and two of them (the next
    batch read while the last was still referenced) made it grow with the
    number of batches. Rows asked for out of order wait in a dict, so the
    answer does not depend on the two orders agreeing. The goal rows are read
    first (the first chunk now); a difference either way is confirmed under
    the goal's lock."""
    rows = Goal.objects.filter(pk__in=batch).order_by("pk").iterator(chunk_size=GOAL_CHUNK)
    waiting: dict[str, Goal] = {}
    # Started now, before the events are read, as the docstring of replay says.
    first = next(rows, None)
    if first is not None:
        waiting[str(first.pk)] = first

    def goal_of(goal_id: str) -> Goal | None:
        while goal_id not in waiting:
            goal = next(rows, None)
            if goal is None:
                return None
            waiting[str(goal.pk)] = goal
        return waiting.pop(goal_id)

    return goal_of


def _confirm(goal_id: str, *, fix: bool) -> GoalReport | None:
    """Fold the goal's events again while holding its row lock (no command can
    append meanwhile) and, with ``fix``, rewrite the projection from that fold.
    The write is also conditional on the locked version: a projection is never
    overwritten with one folded from fewer events than the goal has."""
    with transaction.atomic():
        goal = Goal.objects.select_for_update().filter(pk=goal_id).first()
        if goal is None:
            return None
        differences, values = diff_goal(goal, _decoded([goal_id], REPLAY_FIELDS))
        if not differences:
            return None
        if fix:
            written = Goal.objects.filter(pk=goal_id, version=goal.version).update(**values)
            if written != 1:
                raise DatabaseError(f"goal {goal_id} changed under its row lock")
            # The goals-by-status tallies follow the rewritten status, in the
            # same transaction (the metrics read them, not the goal table).
            tallies.move(goal_id, (goal.status, goal.reason),
                         (values["status"], values["reason"]))
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
    for batch in _batches(ids):
        heads = {str(pk): (version, last_hash) for pk, version, last_hash in
                 Goal.objects.filter(pk__in=batch).values_list("id", "version", "last_hash")}
        seen = set()
        for goal_id, rows in _grouped(batch, *VERIFY_FIELDS):
            seen.add(goal_id)
            version, last_hash = heads[goal_id]
            links = (StoredLink(*row) for row in rows)
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
        rows = _decoded([goal_id], VERIFY_FIELDS)
        broken, checked, _head = first_break(goal_id, (StoredLink(*row) for row in rows),
                                             version=version, last_hash=last_hash)
    return broken, checked
