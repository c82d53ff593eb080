"""Counting failures per client in the shared cache: bad API tokens and failed
admin logins.

The counts live in Django's cache, configured as the database cache
(settings.CACHES): every gunicorn worker, every web process and every host of
a deployment shares it without another service. Windows are fixed and aligned
on the clock (``now // window``), so a count needs no stored expiry and
``Retry-After`` is the time left in the current window. The database cache's
``incr`` is a read and a write, not atomic: concurrent failures may be counted
once instead of twice, which lets an attacker through a few more attempts per
window than the limit, never fewer for an honest client.
"""

import hashlib
import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest

logger = logging.getLogger("wakeledger.security")


def client_address(request: HttpRequest) -> str:
    """The address to count against.

    Behind a reverse proxy (WAKELEDGER_BEHIND_PROXY=1), REMOTE_ADDR is the
    proxy's; the client's is the last X-Forwarded-For entry, the one the proxy
    itself appended (earlier entries are whatever the client sent).
    """
    if settings.WAKELEDGER_BEHIND_PROXY:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if hops:
            return hops[-1][:64]
    return request.META.get("REMOTE_ADDR", "") or "unknown"


@dataclass(frozen=True)
class Window:
    """A fixed window of ``seconds`` and the most failures it allows."""

    name: str
    limit: int
    seconds: int

    def _key(self, subject: str) -> str:
        # Hashed: usernames and addresses have no business in cache keys'
        # character set (memcached-safe) nor in a table an operator may dump.
        digest = hashlib.sha256(subject.encode()).hexdigest()[:32]
        return f"wl:{self.name}:{int(time.time()) // self.seconds}:{digest}"

    def retry_after(self) -> int:
        return self.seconds - int(time.time()) % self.seconds or self.seconds

    def count(self, subject: str) -> int:
        return int(cache.get(self._key(subject), 0))

    def exceeded(self, subject: str) -> bool:
        return self.count(subject) >= self.limit

    def record(self, subject: str) -> int:
        key = self._key(subject)
        if cache.add(key, 1, timeout=self.seconds + 1):
            return 1
        try:
            return cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=self.seconds + 1)
            return 1

    def clear(self, subject: str) -> None:
        cache.delete(self._key(subject))


def bad_tokens() -> Window:
    return Window("bad-token", settings.WAKELEDGER_BAD_TOKEN_LIMIT,
                  settings.WAKELEDGER_BAD_TOKEN_WINDOW_SECONDS)


def login_failures() -> Window:
    """Per username and address: an account guessed at from one place."""
    return Window("login", settings.WAKELEDGER_LOGIN_FAILURE_LIMIT,
                  settings.WAKELEDGER_LOGIN_LOCKOUT_SECONDS)


def login_failures_by_address() -> Window:
    """Per address, any username: one place spraying passwords over accounts."""
    return Window("login-addr", settings.WAKELEDGER_LOGIN_FAILURE_LIMIT * 5,
                  settings.WAKELEDGER_LOGIN_LOCKOUT_SECONDS)
