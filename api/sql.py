"""The API's own per-request statements (the bearer token's lookup, the
Idempotency-Key's insert) on the database driver's cursor.

Django's cursor wrapper costs more than SQLite's own work on these small
statements: opening the wrapper, the execute-wrapper chain, the regular
expression that rewrites ``%s`` into SQLite's ``?``, the debug bookkeeping
(≈ 12 µs of the token statement's 18 µs, measured in process). The store's
append already runs on the driver for the same reason
(``ledger.eventstore.store._execute_locked``). What ``connection.cursor()``
does that matters is kept (``_driver_cursor``): the per-request health
check, the connection opened if need be, the thread check, a transaction
that already failed refused, and driver errors become Django's
(``wrap_database_errors``).

While anything observes the connection — an ``execute_wrapper`` (statement
counts, ``bench/profile_http.py``), ``CaptureQueriesContext`` or ``DEBUG``
(``queries_logged``) — the statement goes through Django's cursor instead,
so it is seen and counted like any other. Same SQL, same parameters.
"""

from collections.abc import Callable
from contextlib import closing
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper

Params = list[Any] | Callable[[BaseDatabaseWrapper], list[Any]]


@cache
def _qmark(sql: str) -> str:
    # Only ever this module's callers' own statements, whose one use of % is
    # the placeholder (the SQLite backend's convert_query does the same).
    return sql.replace("%s", "?")


def _driver_cursor(conn: Any) -> Any:
    """What ``connection.cursor()`` does before a statement, on the driver's
    own cursor (base.BaseDatabaseWrapper._cursor, CursorWrapper.execute)."""
    conn.close_if_health_check_failed()
    conn.ensure_connection()
    conn.validate_thread_sharing()
    conn.validate_no_broken_transaction()
    with conn.wrap_database_errors:
        return conn.connection.cursor()


def _run(sql: str, params: Params, fetch: bool) -> Any:
    # One look-up of the connection: each attribute read through
    # django.db.connection is a look-up in asgiref's Local (≈ 13,000
    # instructions, ≈ 2 µs, measured with callgrind).
    conn = connections[DEFAULT_DB_ALIAS]
    if callable(params):
        params = params(conn)
    if conn.execute_wrappers or conn.queries_logged:  # observed: Django's cursor
        with conn.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone() if fetch else cursor.rowcount
    if conn.vendor == "sqlite":
        sql = _qmark(sql)
    with closing(_driver_cursor(conn)) as cursor, conn.wrap_database_errors:
        cursor.execute(sql, params)
        return cursor.fetchone() if fetch else cursor.rowcount


def fetchone(sql: str, params: Params) -> tuple[Any, ...] | None:
    """The first row of ``sql`` (``%s`` placeholders), or None."""
    return _run(sql, params, fetch=True)


def rowcount(sql: str, params: Params) -> int:
    """Run ``sql`` (``%s`` placeholders); the number of rows it changed.
    ``params`` may be a function of the connection (to adapt a value with
    its ``ops`` without another look-up)."""
    return _run(sql, params, fetch=False)
