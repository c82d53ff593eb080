"""The request id: one id per web request, on every log line it causes.

The middleware (``ledger.project.middleware.RequestIdMiddleware``) takes it
from the request's ``X-Request-ID`` or makes one, and sets it in
``current_id``, a context variable, so whatever runs for the request (the
store, the outbox's effect, a library) logs it without being passed it. The
outbox row a request writes keeps it (``scheduling.models.Dispatch.request_id``)
and the sender runs under it (``bound``), so the dispatch's lines in the
qcluster share the request's id. Events do not carry it: their data is
hashed and their shape fixed.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

HEADER = "X-Request-ID"
# The id of the request (or dispatch) running now, "" outside one.
current_id: ContextVar[str] = ContextVar("wakeledger_request_id", default="")


def current() -> str:
    """The id of the request (or dispatch) running now, "" outside one."""
    return current_id.get()


@contextmanager
def bound(request_id: str) -> Iterator[None]:
    """Run a block under ``request_id`` (the sender of an outbox row)."""
    token = current_id.set(request_id)
    try:
        yield
    finally:
        current_id.reset(token)


class RequestIdFilter(logging.Filter):
    """Every record gets ``request_id`` ("-" outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", ""):
            record.request_id = current_id.get() or "-"
        return True
