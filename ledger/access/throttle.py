"""Counting failures per client in the shared cache: bad API tokens and failed
admin logins.

The counts live in Django's cache, configured as the database cache
(settings.CACHES): every gunicorn worker, every web process and every host of
a deployment shares it without another service. A count is a read and a
write, not atomic: concurrent failures may be counted once instead of twice,
which lets an attacker through a few more attempts than the limit (at most one
per request in flight), never an honest client fewer.

Every authenticated request asks whether its address is locked out, and the
answer is nearly always no: a cache read per request for nothing. So a "no"
is kept in the process for one second (``NOT_LOCKED_MEMO_SECONDS``). A failure
this process counts drops that memo at once, so its own lockouts hold from
the request that reaches the limit; a lockout another worker set is seen here
within the second, which lets a locked-out address through at most one more
second per worker.
"""

import hashlib
import logging
import math
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


# (window name, subject) -> time.monotonic() until which "not locked out" holds.
NOT_LOCKED_MEMO_SECONDS = 1.0
_MEMO_SIZE = 10_000
_not_locked: dict[tuple[str, str], float] = {}


@dataclass(frozen=True)
class Window:
    """At most ``limit`` failures within ``seconds`` of the first; the one
    that reaches the limit locks the subject out for ``seconds``."""

    name: str
    limit: int
    seconds: int

    def _key(self, kind: str, subject: str) -> str:
        # Hashed: usernames and addresses have no business in cache keys'
        # character set (memcached-safe) nor in a table an operator may dump.
        digest = hashlib.sha256(subject.encode()).hexdigest()[:32]
        return f"wl:{self.name}:{kind}:{digest}"

    def locked_for(self, subject: str) -> int:
        """Seconds until ``subject`` may try again; 0 when it is not locked out."""
        memo, now = (self.name, subject), time.monotonic()
        if _not_locked.get(memo, 0.0) > now:
            return 0
        until = cache.get(self._key("lock", subject))
        wait = max(0, math.ceil(until - time.time())) if until else 0
        if not wait:
            if len(_not_locked) >= _MEMO_SIZE:
                _not_locked.clear()  # bounded; a cleared memo only costs a cache read
            _not_locked[memo] = now + NOT_LOCKED_MEMO_SECONDS
        return wait

    def record(self, subject: str) -> int:
        """Count one failure; returns the count in the current window."""
        _not_locked.pop((self.name, subject), None)
        key, now = self._key("count", subject), time.time()
        # (count, window end), set with the window's remaining time: the
        # cache's incr would reset the expiry to the default timeout.
        count, ends = cache.get(key) or (0, now + self.seconds)
        if ends <= now:
            count, ends = 0, now + self.seconds
        count += 1
        cache.set(key, (count, ends), timeout=max(1, math.ceil(ends - now)))
        if count >= self.limit:
            cache.set(self._key("lock", subject), now + self.seconds, timeout=self.seconds)
        return count

    def clear(self, subject: str) -> None:
        cache.delete_many([self._key("count", subject), self._key("lock", subject)])


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
