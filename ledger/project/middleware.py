"""The project's own middleware, in the order settings.MIDDLEWARE runs it:
the request id and the Content-Security-Policy.

**The request id** (``RequestIdMiddleware``): taken from the request's
``X-Request-ID`` when well-formed (a proxy or a client that already named the
request), else generated; sent back in the response's ``X-Request-ID``, and
set in ``requestid.current_id`` for every log line the request causes
(ledger/project/requestid.py).

**Content-Security-Policy** on every response. Django 5.2 has no built-in
CSP. The policy allows scripts and styles from our own origin and, inline,
only when they carry this response's nonce (``{{ csp_nonce }}`` in
templates): an injected ``<script>`` or ``style=""`` in a goal's objective
rendered by the admin would not run even if escaping ever failed. Django's
admin and our templates need nothing else.
"""

import re
import secrets
import uuid
from collections.abc import Callable
from typing import Any

from django.core.signals import request_finished
from django.http import HttpRequest, HttpResponse

from ledger.project.requestid import HEADER, current_id

# ---------------------------------------------------------------- the request id

_META_KEY = "HTTP_X_REQUEST_ID"  # as WSGI names it
# Printable, no spaces or quotes, bounded: it goes into log lines and a column.
_WELL_FORMED = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,63}")


def accepted(value: str | None) -> str:
    """The incoming id when well-formed, else a new one."""
    if value and _WELL_FORMED.fullmatch(value):
        return value
    return uuid.uuid4().hex


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
        current_id.set(request_id)
        response = self.get_response(request)
        response[HEADER] = request_id
        return response


def _finished(**_: object) -> None:
    current_id.set("")


request_finished.connect(_finished, dispatch_uid="wakeledger.request_id")

# ---------------------------------------------------------------- Content-Security-Policy

POLICY = (
    "default-src 'self'; "
    "script-src 'self' 'nonce-{nonce}'; "
    "style-src 'self' 'nonce-{nonce}'; "
    "img-src 'self' data:; "
    "font-src 'self'; "
    "connect-src 'self'; "
    "object-src 'none'; "
    "base-uri 'none'; "
    "form-action 'self'; "
    "frame-ancestors 'none'"
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        nonce = secrets.token_urlsafe(16)
        request.csp_nonce = nonce  # type: ignore[attr-defined]
        response = self.get_response(request)
        response.setdefault("Content-Security-Policy", POLICY.format(nonce=nonce))
        return response


def csp_nonce(request: HttpRequest) -> dict[str, Any]:
    """Template context processor: ``<style nonce="{{ csp_nonce }}">``."""
    return {"csp_nonce": getattr(request, "csp_nonce", "")}
