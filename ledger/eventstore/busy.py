"""A write that could not get the database within ``WAKELEDGER_DB_WAIT_SECONDS``.

SQLite says so with SQLITE_BUSY ("database is locked") once its busy timeout
is spent; PostgreSQL with lock_not_available (55P03) when ``lock_timeout``
ends a lock wait, or query_canceled (57014) when a ``statement_timeout`` an
operator set ends a statement. Either way the transaction was rolled back
and nothing was recorded: the caller may simply try again. The API answers it
503 ``database_busy`` with Retry-After (api/errors.py), in one place.
"""

from django.conf import settings

# SQLite's primary result codes (the low byte of an extended code).
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6
_PG_BUSY = frozenset({"55P03", "57014"})


def is_busy(error: BaseException) -> bool:
    """Whether ``error`` (Django's wrapped driver error, or the driver's own)
    says the database could not be had in time."""
    for cause in (error, error.__cause__):
        if cause is None:
            continue
        code = getattr(cause, "sqlite_errorcode", None)
        if isinstance(code, int):
            return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
        if getattr(cause, "sqlstate", None) in _PG_BUSY:
            return True
    return "database is locked" in str(error)


def wait_seconds() -> int:
    """How long a write waits for the database before it is refused, and so
    how long a client is asked to wait before it tries again."""
    return int(settings.WAKELEDGER_DB_WAIT_SECONDS)
