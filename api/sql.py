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

from contextlib import closing
from functools import cache
from typing import Any

from django.db import connection


@cache
def _qmark(sql: str) -> str:
    # Only ever this module's callers' own statements, whose one use of % is
    # the placeholder (the SQLite backend's convert_query does the same).
    return sql.replace("%s", "?")


def _driver_sql(sql: str) -> str:
    return _qmark(sql) if connection.vendor == "sqlite" else sql


def _observed() -> bool:
    return bool(connection.execute_wrappers) or connection.queries_logged


def _driver_cursor() -> Any:
    """What ``connection.cursor()`` does before a statement, on the driver's
    own cursor (base.BaseDatabaseWrapper._cursor, CursorWrapper.execute)."""
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    connection.validate_no_broken_transaction()
    with connection.wrap_database_errors:
        return connection.connection.cursor()


def fetchone(sql: str, params: list[Any]) -> tuple[Any, ...] | None:
    """The first row of ``sql`` (``%s`` placeholders), or None."""
    if _observed():
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone()
    with closing(_driver_cursor()) as cursor, connection.wrap_database_errors:
        cursor.execute(_driver_sql(sql), params)
        return cursor.fetchone()


def rowcount(sql: str, params: list[Any]) -> int:
    """Run ``sql`` (``%s`` placeholders); the number of rows it changed."""
    if _observed():
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.rowcount
    with closing(_driver_cursor()) as cursor, connection.wrap_database_errors:
        cursor.execute(_driver_sql(sql), params)
        return cursor.rowcount
