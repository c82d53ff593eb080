"""Content-Security-Policy on every response, and the admin login's lockout.

Django 5.2 has no built-in CSP. The policy allows scripts and styles from our
own origin and, inline, only when they carry this response's nonce
(``{{ csp_nonce }}`` in templates): an injected ``<script>`` or ``style=""``
in a goal's objective rendered by the admin would not run even if escaping
ever failed. Django's admin and our templates need nothing else.
"""

import math
import secrets
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.http import HttpRequest, HttpResponse

from ledger.access import throttle

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


class LockoutAuthenticationForm(AdminAuthenticationForm):
    """The admin login form, refusing a username guessed at too often.

    After WAKELEDGER_LOGIN_FAILURE_LIMIT failures for one username from one
    address (or five times as many for any usernames from one address) within
    WAKELEDGER_LOGIN_LOCKOUT_SECONDS, the form says so and does not check the
    password, right or wrong, until the window ends. Counting per username and
    address means an attacker cannot lock the real operator out from
    elsewhere.
    """

    error_messages = {
        **AdminAuthenticationForm.error_messages,
        "locked_out": ("Too many failed logins for this account from your address. "
                       "Try again in %(minutes)d minutes."),
    }

    def clean(self) -> dict[str, Any]:
        username = (self.cleaned_data.get("username") or "").strip().lower()
        address = throttle.client_address(self.request) if self.request else "unknown"
        per_user, per_address = throttle.login_failures(), throttle.login_failures_by_address()
        subject = f"{username}\n{address}"
        for window, key in ((per_user, subject), (per_address, address)):
            wait = window.locked_for(key)
            if wait:
                throttle.logger.warning("admin login refused: locked out (%s from %s)",
                                        username or "-", address)
                raise forms.ValidationError(
                    self.error_messages["locked_out"], code="locked_out",
                    params={"minutes": max(1, math.ceil(wait / 60))})
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            failures = per_user.record(subject)
            per_address.record(address)
            throttle.logger.warning("admin login failed for %s from %s (%d in a row)",
                                    username or "-", address, failures)
            raise
        per_user.clear(subject)
        return cleaned
