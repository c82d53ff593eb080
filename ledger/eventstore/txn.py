"""The command's transaction: Django's outermost ``atomic()``, without its layers.

A command that opens its own transaction (the common case: a scheduler
task, a management command, an HTTP request without an Idempotency-Key)
spent as much CPU entering and leaving ``transaction.atomic()`` as on its
rules (docs/performance.md): ``get_connection`` twice, ``set_autocommit``
twice, each with ``ensure_connection`` and ``close_if_health_check_failed``,
four ``async_unsafe`` checks, and a generator-based ``debug_transaction``
around COMMIT. ``outermost`` is the same outermost block, step for step,
done once: the connection's state (``in_atomic_block``, ``autocommit``,
``atomic_blocks``, ``needs_rollback``, ``commit_on_exit``, the commit hooks)
is exactly what ``Atomic`` leaves at every point, so everything inside (the
ORM, an effect's nested ``atomic()`` and its savepoints, ``on_commit``, a
durable block refusing to nest) behaves as under ``atomic()``, and on_commit
hooks run after the COMMIT and never after a rollback.

Anywhere else (inside an outer atomic block, or with autocommit off) it is
``transaction.atomic`` itself.
"""

from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

from django.db import DatabaseError, Error, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import debug_transaction

# What ``atomic_blocks`` holds while ours is open: a durable block nested in
# it must see an outer block (and raise), as it would under atomic().
_BLOCK = transaction.Atomic(None, False, False)


def command(conn: BaseDatabaseWrapper, *, savepoint: bool) -> AbstractContextManager[Any]:
    """The transaction a store command runs in: ``outermost`` when it opens
    the transaction, else ``atomic(savepoint=...)`` in the caller's."""
    if conn.in_atomic_block:
        return transaction.atomic(conn.alias, savepoint=savepoint)
    conn.ensure_connection()  # connects if needed; refuses an async context
    if not conn.autocommit:
        return transaction.atomic(conn.alias, savepoint=savepoint)
    return _Outermost(conn)


class _Outermost:
    """``Atomic.__enter__``/``__exit__`` for an outermost block under
    autocommit, the branches that case takes and nothing else."""

    __slots__ = ("conn",)

    def __init__(self, conn: BaseDatabaseWrapper) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        conn = self.conn
        conn.commit_on_exit = True
        conn.needs_rollback = False
        # set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)
        conn.validate_thread_sharing()
        conn.close_if_health_check_failed()
        if conn.connection is None:
            conn.ensure_connection()
        if hasattr(conn, "_start_transaction_under_autocommit"):
            conn._start_transaction_under_autocommit()  # SQLite: BEGIN IMMEDIATE
        elif conn.queries_logged:
            with debug_transaction(conn, "BEGIN"):
                conn._set_autocommit(False)
        else:
            conn._set_autocommit(False)
        conn.autocommit = False
        conn.in_atomic_block = True
        conn.atomic_blocks.append(_BLOCK)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        conn = self.conn
        conn.atomic_blocks.pop()
        conn.in_atomic_block = False
        try:
            if conn.closed_in_transaction:
                pass  # the database rolls back by itself
            elif exc_type is None and not conn.needs_rollback:
                try:
                    # BaseDatabaseWrapper.commit, less its async check (done
                    # on entry) and validate_no_atomic_block (just unset).
                    conn._commit()
                    conn.errors_occurred = False
                    conn.run_commit_hooks_on_set_autocommit_on = True
                except DatabaseError:
                    try:
                        conn.rollback()
                    except Error:
                        conn.close()
                    raise
            else:
                conn.needs_rollback = False
                try:
                    conn.rollback()
                except Error:
                    conn.close()
        finally:
            if conn.closed_in_transaction:
                conn.connection = None
            else:
                _autocommit_on(conn)


def _autocommit_on(conn: BaseDatabaseWrapper) -> None:
    """``set_autocommit(True)``: back to autocommit, then the on_commit hooks
    of a committed transaction (a rollback left none to run)."""
    conn.close_if_health_check_failed()
    if conn.connection is None:
        conn.ensure_connection()
    conn._set_autocommit(True)
    conn.autocommit = True
    if conn.run_commit_hooks_on_set_autocommit_on:
        conn.run_and_clear_commit_hooks()
        conn.run_commit_hooks_on_set_autocommit_on = False
