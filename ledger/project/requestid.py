"""The request id: one id per web request, on every log line it causes.

Taken from the request's ``X-Request-ID`` when well-formed (a proxy or a
client that already named the request), else generated; sent back in the
response's ``X-Request-ID``. It lives in a context variable, so whatever runs
for the request (the store, the outbox's effect, a library) logs it without
being passed it. The outbox row a request writes keeps it
(``scheduling.models.Dispatch.request_id``) and the sender runs under it
(``bound``), so the dispatch's lines in the qcluster share the request's id.
Events do not carry it: their data is hashed and their shape fixed.
"""

import logging
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.core.signals import request_finished
from django.http import HttpRequest, HttpResponse

HEADER = "X-Request-ID"
_META_KEY = "HTTP_X_REQUEST_ID"  # as WSGI names it
# Printable, no spaces or quotes, bounded: it goes into log lines and a column.
_WELL_FORMED = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,63}")
_current: ContextVar[str] = ContextVar("wakeledger_request_id", default="")


def current() -> str:
    """The id of the request (or dispatch) running now, "" outside one."""
    return _current.get()


def accepted(value: str | None) -> str:
    """The incoming id when well-formed, else a new one."""
    if value and _WELL_FORMED.fullmatch(value):
        return value
    return uuid.uuid4().hex


@contextmanager
def bound(request_id: str) -> Iterator[None]:
    """Run a block under ``request_id`` (the sender of an outbox row)."""
    token = _current.set(request_id)
    try:
        yield
    finally:
        _current.reset(token)


class RequestIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # META, not request.headers: the first look at .headers builds a dict
        # of every header of the request (about 5 µs), for this one.
        request_id = accepted(request.META.get(_META_KEY))
        request.request_id = request_id
        # Set, not bound to this call: Django logs a 4xx or 5xx answer
        # ("Bad Request: /api/v1/goals") after the middleware has returned.
        # Cleared when the request is finished (``_finished``).
        _current.set(request_id)
        response = self.get_response(request)
        response[HEADER] = request_id
        return response


def _finished(**_: object) -> None:
    _current.set("")


request_finished.connect(_finished, dispatch_uid="wakeledger.request_id")


class RequestIdFilter(logging.Filter):
    """Every record gets ``request_id`` ("-" outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", ""):
            record.request_id = current() or "-"
        return True
