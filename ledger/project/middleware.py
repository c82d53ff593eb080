"""The project's own middleware, in the order settings.MIDDLEWARE runs it:
the request id, the Content-Security-Policy, and Django's lazy user and
messages skipped for a token-authenticated API request.

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

**The browser's middleware**, not run for a token-authenticated API
request. The request's lazy Django user and the messages framework serve the
admin (and an operator's browser session on the API). A request under
``/api/`` that carries an ``Authorization`` header is authenticated by that
header alone: DRF tries the bearer authentication first, and a header it
cannot accept is a 401 before the session authentication is reached. So for
such a request DRF replaces the lazy user with the token's and no message is
added or shown; building them anyway was about 10 µs of CPU per request
(docs/performance.md). Each class here is Django's own, subclassed (the
admin's system checks look for subclasses), and runs in full for every other
request, for every ASGI request, and for ``/api/`` without the header.
SessionMiddleware stays Django's, by its exact path: the deploy checks of the
session cookie look for that path, and a session that is never touched costs
little (its store is built, never read).
"""

import re
import secrets
import uuid
from collections.abc import Callable
from typing import Any

from django.contrib.auth.middleware import AuthenticationMiddleware as _Authentication
from django.contrib.messages.middleware import MessageMiddleware as _Messages
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

# ---------------------------------------------------------------- the browser's

API_PREFIX = "/api/"


def token_api_request(request: HttpRequest) -> bool:
    """A request under /api/ with an Authorization header (any scheme: a
    scheme other than Bearer is a 401 too, never a session)."""
    return request.path.startswith(API_PREFIX) and bool(
        request.META.get("HTTP_AUTHORIZATION"))


class _BrowserOnly:
    get_response: Any
    async_mode: bool

    def __call__(self, request: HttpRequest) -> Any:
        if not self.async_mode and token_api_request(request):
            return self.get_response(request)
        return super().__call__(request)  # type: ignore[misc]


class AuthenticationMiddleware(_BrowserOnly, _Authentication):
    pass


class MessageMiddleware(_BrowserOnly, _Messages):
    pass
