"""The append path's recorders: how a command's three statements (lock and
read the goal row; insert the events; update the row), and the metrics'
tally upsert of the commands that move a counter (a claim, a change of
status), reach each database.

``recorder_for(conn)`` is the one way ``store`` writes. Each recorder takes
the same values and leaves the same rows:

- ``DjangoRecorder``: Django's own cursor and adapters, for any database; the
  reference the others are tested against (tests/eventstore/test_recorders.py);
- ``SQLiteRecorder``: the same statements on the driver's cursor, in its own
  parameter style (Django's cursor wrapper costs more than SQLite's work);
- ``PostgresRecorder``: psycopg's libpq handle: BEGIN sent with the locked
  read, the insert and update in one unnamed statement with text
  parameters (one round trip each; nothing kept on the server between
  transactions, so it works behind a transaction-pooling PgBouncer).

Table and column names come from the models' Meta, never from input.
"""

import json
import uuid
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.db.backends.base.base import BaseDatabaseWrapper

from ledger.models import Event as EventRow
from ledger.models import Goal, Tally

if TYPE_CHECKING:
    from ledger.eventstore.store import StoredEvent


NOT_BEGUN: Any = object()


def begin_and_lock(conn: BaseDatabaseWrapper, uid: uuid.UUID) -> Any:
    """PostgreSQL: open the command's transaction and lock-and-read its goal
    row in one round trip; ``NOT_BEGUN`` when this is not the place to.

    psycopg opens a transaction with a BEGIN of its own before the first
    statement, a full round trip to the server (≈ 1/4 of an append's trips);
    its pipeline mode waits for that BEGIN too. One simple query of two
    statements costs one. psycopg reads the transaction status from the
    connection itself, so it sees the transaction as begun and commits or
    rolls it back as usual (Django's atomic() does). The goal id is inlined
    from a parsed UUID (hex digits and hyphens), never from text.
    Not taken inside a transaction already begun (a start, an outer
    atomic()), nor with an isolation level or read-only mode set on the
    connection, whose BEGIN psycopg spells differently."""
    raw = conn.connection
    pgconn = getattr(raw, "pgconn", None)
    if pgconn is None:  # psycopg2: no libpq handle to speak through
        return NOT_BEGUN
    from psycopg import errors, pq

    if (pgconn.transaction_status != pq.TransactionStatus.IDLE or raw.autocommit
            or raw.isolation_level is not None or raw.read_only is not None
            or raw.deferrable is not None):
        return NOT_BEGUN
    result = pgconn.exec_(LOCK_PG.format(uid=uid).encode())
    if result.status != pq.ExecStatus.TUPLES_OK:
        raise errors.error_from_result(result, encoding=raw.info.encoding)
    if result.ntuples == 0:
        return None
    version, head, state = (result.get_value(0, i) for i in range(3))
    return int(version), head.decode(), state.decode()


LOCK_PG = (f"BEGIN; SELECT version, last_hash, state FROM {Goal._meta.db_table} "
           "WHERE id = '{uid}'::uuid FOR UPDATE")


def insert_sql(conn: BaseDatabaseWrapper, sql: "Statements", pk: Any,
               stored: "list[StoredEvent]", *, as_text: bool = False) -> tuple[str, list[Any]]:
    """The events' INSERT and its values; ``as_text``: the JSON as its canonical
    text whatever the database (SQLite always stores that text)."""
    values: list[Any] = []
    text = as_text or conn.vendor == "sqlite"
    for e in stored:
        values += [
            pk,
            e.seq,
            e.kind,
            e.data_text if text else conn.ops.adapt_json_value(e.data, None),
            e.actor,
            _datetime_value(conn, e.recorded_at),
            e.idempotency_key,
            e.prev_hash,
            e.hash,
        ]
    return sql.insert_head + ", ".join([sql.insert_row] * len(stored)), values


def append_pg(conn: BaseDatabaseWrapper, sql: "Statements", stored: "list[StoredEvent]",
              changed: tuple[str, ...], values: list[Any]) -> tuple[int, str | None]:
    """PostgreSQL: insert the events and update the goal row in one statement
    (a data-modifying WITH always runs to completion; the row count is the
    UPDATE's), sent through libpq with its parameters as text; the row count
    and the state as jsonb spells it (``RETURNING state``).

    Not through a psycopg cursor: Django's is a client-side-binding one, which
    quotes every parameter into the query text in Python, and that quoting and
    the JSON adapters cost about as much as all of the command's rules
    (``bench/profile_append.py``). Here each parameter is already the text
    PostgreSQL parses (the event's canonical JSON is the very text hashed into
    the chain) and the server infers its type from the column, as it does for
    a client-side-bound literal. ``values`` are the INSERT's and then the
    UPDATE's, in the driver's value types (``adapt``)."""
    from psycopg import errors, pq

    key = (len(stored), changed)
    query = _PG_APPENDS.get(key)
    if query is None:
        insert = sql.insert_head + ", ".join([sql.insert_row] * len(stored))
        query = _numbered(f"WITH appended AS ({insert}) {sql.update(changed)} RETURNING state")
        _PG_APPENDS[key] = query
    raw = conn.connection
    # An unnamed statement (Parse, Bind, Execute in one message train): no
    # server-side state outlives it, so it works behind a transaction-pooling
    # PgBouncer, whose server connections change between transactions.
    result = raw.pgconn.exec_params(query, [_as_text(v) for v in values])
    if result.status != pq.ExecStatus.TUPLES_OK:
        raise errors.error_from_result(result, encoding=raw.info.encoding)
    returned = result.get_value(0, 0) if result.ntuples else None
    return result.command_tuples or 0, returned.decode() if returned is not None else None


# The append statements in PostgreSQL's numbered placeholders, by
# (events appended, columns changed): a handful of shapes in all.
_PG_APPENDS: dict[tuple[int, tuple[str, ...]], bytes] = {}


def _numbered(query: str) -> bytes:
    parts = query.split("%s")
    return "".join(part + (f"${n}" if n < len(parts) else "")
                   for n, part in enumerate(parts, start=1)).encode()


def _as_text(value: Any) -> bytes | None:
    """A parameter as PostgreSQL's text input reads it. NUL cannot travel in
    a libpq text parameter (it would end the string there): refused, as
    psycopg's own text adapter refuses it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return b"t" if value else b"f"
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("the append path writes aware datetimes only")
        if value.tzinfo is UTC:
            # isoformat()'s text, by %-formatting (see _datetime_value).
            fields = (value.year, value.month, value.day, value.hour, value.minute,
                      value.second)
            text = (_ISO_US % (*fields, value.microsecond) if value.microsecond
                    else _ISO_S % fields)
            return text.encode()
        return value.isoformat().encode()
    text = str(value)
    if "\x00" in text:
        from psycopg import DataError

        raise DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
    return text.encode()


def pk_of(conn: BaseDatabaseWrapper, value: uuid.UUID | str) -> Any:
    """A goal id as the driver wants it (what UUIDField.get_db_prep_value does)."""
    value = value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    return value if conn.features.has_native_uuid_field else value.hex


def adapt(conn: BaseDatabaseWrapper, value: Any) -> Any:
    if isinstance(value, datetime):
        return _datetime_value(conn, value)
    return value


def _datetime_value(conn: BaseDatabaseWrapper, value: datetime) -> Any:
    """What Django's ``adapt_datetimefield_value`` gives, without its layers on
    SQLite: the instant in UTC, naive, as ``str`` spells it (the same text,
    so the ORM's reads and comparisons see what they always saw). Four of
    these per command cost more than SQLite's INSERT did."""
    if conn.vendor == "sqlite" and value.tzinfo is not None and conn.timezone_name == "UTC":
        if value.tzinfo is not UTC:
            value = value.astimezone(UTC)
        # str() of the naive instant, spelled by %-formatting: the same text
        # (no fraction at a whole second) at half the cost of str() or
        # isoformat(), which go through C's printf machinery.
        fields = (value.year, value.month, value.day, value.hour, value.minute,
                  value.second)
        return (_SQLITE_US % (*fields, value.microsecond) if value.microsecond
                else _SQLITE_S % fields)
    return conn.ops.adapt_datetimefield_value(value)


_SQLITE_S = "%04d-%02d-%02d %02d:%02d:%02d"
_SQLITE_US = _SQLITE_S + ".%06d"
_ISO_S = "%04d-%02d-%02dT%02d:%02d:%02d+00:00"
_ISO_US = "%04d-%02d-%02dT%02d:%02d:%02d.%06d+00:00"


# Projected columns a command may change (workspace, goal key and creation
# time are fixed when the goal starts).
MUTABLE = ("agent", "workspace_bound", "status", "reason", "lease_expires_at", "next_wake_at",
            "paused_until", "deadline_at", "attention", "updated_at")


@dataclass
class Statements:
    lock: str
    insert_head: str
    insert_row: str
    placeholder: str
    _updates: dict[tuple[str, ...], str] = field(default_factory=dict)

    def update(self, changed: tuple[str, ...]) -> str:
        if changed not in self._updates:
            p = self.placeholder
            assignments = ", ".join(f"{name} = {p}" for name in
                                    ("version", "last_hash", "state", *changed))
            self._updates[changed] = (f"UPDATE {Goal._meta.db_table} SET {assignments} "
                                      f"WHERE id = {p} AND version = {p}")
        return self._updates[changed]


STATEMENTS: dict[str, Statements] = {}


def statements_for(conn: BaseDatabaseWrapper) -> Statements:
    """The append path's SQL in the driver's parameter style, built once per vendor.
    Table names come from the models' Meta, never from input."""
    if conn.vendor not in STATEMENTS:
        p = "?" if conn.vendor == "sqlite" else "%s"
        goal, event = Goal._meta.db_table, EventRow._meta.db_table
        # SQLite has no row locks; its IMMEDIATE transaction already holds the
        # database's write lock from BEGIN.
        lock_suffix = " FOR UPDATE" if conn.features.has_select_for_update else ""
        STATEMENTS[conn.vendor] = Statements(
            lock=f"SELECT version, last_hash, state FROM {goal} WHERE id = {p}{lock_suffix}",
            insert_head=(
                f"INSERT INTO {event} (goal_id, seq, kind, data, actor, recorded_at, "
                "idempotency_key, prev_hash, hash) VALUES "
            ),
            insert_row="(" + ", ".join([p] * 9) + ")",
            placeholder=p,
        )
    return STATEMENTS[conn.vendor]


class DjangoRecorder:
    """Through Django's cursor: its placeholders, its adapters, its error
    wrapping. Any database Django speaks; the fast recorders' reference."""

    def read_locked(self, conn: BaseDatabaseWrapper, uid: uuid.UUID) -> tuple[Any, ...] | None:
        with conn.cursor() as cursor:
            cursor.execute(statements_for(conn).lock.replace("?", "%s"), [pk_of(conn, uid)])
            return cursor.fetchone()

    def write(self, conn: BaseDatabaseWrapper, pk: Any, version: int, stored_state: Any,
              head: str, stored: "list[StoredEvent]", changed: tuple[str, ...],
              new: dict[str, Any]) -> tuple[int, str | None]:
        """Insert ``stored``, update the goal row from ``version``: the row
        count and the state's text as the database now holds it (None when
        this recorder cannot tell)."""
        sql = _django_statements(conn)
        values: list[Any] = []
        for e in stored:
            values += [pk, e.seq, e.kind, conn.ops.adapt_json_value(e.data, None), e.actor,
                       conn.ops.adapt_datetimefield_value(e.recorded_at), e.idempotency_key,
                       e.prev_hash, e.hash]
        update = [stored[-1].seq, head, conn.ops.adapt_json_value(stored_state, None),
                  *(_django_value(conn, new[name]) for name in changed), pk, version]
        with conn.cursor() as cursor:
            cursor.execute(sql.insert_head + ", ".join([sql.insert_row] * len(stored)), values)
            cursor.execute(sql.update(changed), update)
            return cursor.rowcount, None

    def add_tallies(self, conn: BaseDatabaseWrapper, rows: list[tuple[str, str, float]]) -> None:
        """Add ``rows`` (name, labels, delta; sorted) to the tallies in one upsert."""
        with conn.cursor() as cursor:
            cursor.execute(tally_sql(conn, len(rows), "%s"), _flat(rows))


class SQLiteRecorder:
    """SQLite: the driver's own cursor and ``?`` placeholders; the instants
    adapted as Django would (``adapt``), the JSON as its canonical text."""

    def read_locked(self, conn: BaseDatabaseWrapper, uid: uuid.UUID) -> tuple[Any, ...] | None:
        with closing(conn.connection.cursor()) as cursor:
            cursor.execute(statements_for(conn).lock, (pk_of(conn, uid),))
            return cursor.fetchone()

    def write(self, conn: BaseDatabaseWrapper, pk: Any, version: int, stored_state: Any,
              head: str, stored: "list[StoredEvent]", changed: tuple[str, ...],
              new: dict[str, Any]) -> tuple[int, str | None]:
        sql = statements_for(conn)
        text = json.dumps(stored_state)
        update = [stored[-1].seq, head, text,
                  *(adapt(conn, new[name]) for name in changed), pk, version]
        with closing(conn.connection.cursor()) as cursor:
            cursor.execute(*insert_sql(conn, sql, pk, stored))
            cursor.execute(sql.update(changed), update)
            return cursor.rowcount, text  # SQLite keeps the very text it was given

    def add_tallies(self, conn: BaseDatabaseWrapper, rows: list[tuple[str, str, float]]) -> None:
        # The statement Django's cursor would send, without its layers: on a
        # claim they cost as much as the upsert (docs/performance.md).
        with conn.wrap_database_errors, closing(conn.connection.cursor()) as cursor:
            cursor.execute(tally_sql(conn, len(rows), "?"), _flat(rows))


class PostgresRecorder:
    """PostgreSQL through psycopg's libpq handle (``begin_and_lock``,
    ``append_pg``); the lock through the driver's cursor where the
    transaction has already begun."""

    def read_locked(self, conn: BaseDatabaseWrapper, uid: uuid.UUID) -> tuple[Any, ...] | None:
        row = begin_and_lock(conn, uid)
        if row is NOT_BEGUN:
            with closing(conn.connection.cursor()) as cursor:
                cursor.execute(statements_for(conn).lock, (pk_of(conn, uid),))
                row = cursor.fetchone()
        return row

    def write(self, conn: BaseDatabaseWrapper, pk: Any, version: int, stored_state: Any,
              head: str, stored: "list[StoredEvent]", changed: tuple[str, ...],
              new: dict[str, Any]) -> tuple[int, str | None]:
        sql = statements_for(conn)
        _, insert_values = insert_sql(conn, sql, pk, stored, as_text=True)
        update = [stored[-1].seq, head, json.dumps(stored_state),
                  *(adapt(conn, new[name]) for name in changed), pk, version]
        # It returns the state as jsonb spells it: the text the next
        # command's locked read will find.
        return append_pg(conn, sql, stored, changed, [*insert_values, *update])

    def add_tallies(self, conn: BaseDatabaseWrapper, rows: list[tuple[str, str, float]]) -> None:
        # One unnamed statement with text parameters, as ``append_pg``; the
        # server coerces each VALUES column to its target column's type.
        from psycopg import errors, pq

        raw = conn.connection
        if raw.pgconn.transaction_status == pq.TransactionStatus.IDLE and not raw.autocommit:
            # No statement of this transaction reached the server yet: psycopg
            # sends its BEGIN before its own cursor's first statement only.
            DjangoRecorder().add_tallies(conn, rows)
            return
        with conn.wrap_database_errors:
            result = raw.pgconn.exec_params(_numbered(tally_sql(conn, len(rows), "%s")),
                                            [_as_text(v) for v in _flat(rows)])
            if result.status != pq.ExecStatus.COMMAND_OK:
                raise errors.error_from_result(result, encoding=raw.info.encoding)


def tally_sql(conn: BaseDatabaseWrapper, count: int, p: str) -> str:
    """The tallies' upsert of ``count`` rows in placeholder ``p``, built once
    per shape: a row's delta is added to its value, a new row starts at it."""
    key = (conn.vendor, count, p)
    sql = _TALLY_SQL.get(key)
    if sql is None:
        table = conn.ops.quote_name(Tally._meta.db_table)
        values = ", ".join([f"({p}, {p}, {p})"] * count)
        sql = _TALLY_SQL[key] = (
            f"INSERT INTO {table} (name, labels, value) VALUES {values} "
            f"ON CONFLICT (name, labels) DO UPDATE SET value = {table}.value + excluded.value")
    return sql


_TALLY_SQL: dict[tuple[str, int, str], str] = {}


def _flat(rows: list[tuple[str, str, float]]) -> list[Any]:
    return [item for row in rows for item in row]


Recorder = DjangoRecorder | SQLiteRecorder | PostgresRecorder
_RECORDERS: dict[str, Recorder] = {}


def recorder_for(conn: BaseDatabaseWrapper) -> Recorder:
    """The recorder for this connection's database (a driver without a fast
    recorder, psycopg2 for one, gets Django's)."""
    key = conn.vendor
    if key == "postgresql" and not hasattr(conn.connection, "pgconn"):
        key = "django"
    recorder = _RECORDERS.get(key)
    if recorder is None:
        recorder = _RECORDERS[key] = {"sqlite": SQLiteRecorder,
                                      "postgresql": PostgresRecorder}.get(key, DjangoRecorder)()
    return recorder


def _django_statements(conn: BaseDatabaseWrapper) -> Statements:
    """The append's statements with Django's ``%s`` placeholders, whatever the driver's."""
    key = f"django:{conn.vendor}"
    if key not in STATEMENTS:
        sql = statements_for(conn)
        STATEMENTS[key] = Statements(lock=sql.lock.replace("?", "%s"),
                                     insert_head=sql.insert_head,
                                     insert_row=sql.insert_row.replace("?", "%s"),
                                     placeholder="%s")
    return STATEMENTS[key]


def _django_value(conn: BaseDatabaseWrapper, value: Any) -> Any:
    return conn.ops.adapt_datetimefield_value(value) if isinstance(value, datetime) else value
