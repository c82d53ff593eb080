"""Who may call the API, as what and how often: roles, API tokens, the
failures counted per client (bad tokens, the admin login's lockout), and the
housekeeping of idempotency records and /mcp lease rows.

Roles are Django groups: agent, auditor, operator.

- agent: sees and writes only its own goals (another agent's goal is a 404);
- auditor: reads everything, writes nothing;
- operator: what auditors do, plus the operator endpoints.
A superuser logged in to the admin counts as an operator.

Here rather than in ``api`` so that the ledger's operator commands and admin
and the scheduled housekeeping need nothing from the REST shell; ``api``
authenticates bearer tokens (api.auth) with what this module defines.

Failures are counted per client (``Window``: bad API tokens, failed admin
logins; ``LockoutAuthenticationForm`` locks a guessed-at account out of the
admin). The counts live in Django's cache, configured as the database cache
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
import hmac
import logging
import math
import secrets
import string
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.cache import cache
from django.http import HttpRequest
from django.utils.crypto import salted_hmac

from ledger.access.models import ApiToken, IdempotencyRecord, McpLease
from ledger.eventstore import clock
from ledger.models import Goal

AGENT, AUDITOR, OPERATOR = "agent", "auditor", "operator"
ROLES = (AGENT, AUDITOR, OPERATOR)
# A user in several role groups has the first of these (api.auth ranks
# them the same way in SQL).
PRIORITY = (OPERATOR, AUDITOR, AGENT)

_ALPHABET = string.ascii_letters + string.digits


def role_of(user: AbstractBaseUser | AnonymousUser | None) -> str | None:
    """The user's role, looked up once per user object: a bearer-token
    caller's comes with its token (api.auth.authenticate fills the cache
    from the same query); an admin session's user costs one groups query."""
    if user is None or not user.is_authenticated:
        return None
    cached = getattr(user, "_wakeledger_role", False)
    if cached is not False:
        return cached
    if user.is_superuser:
        role = OPERATOR
    else:
        names = set(user.groups.values_list("name", flat=True))
        role = next((r for r in PRIORITY if r in names), None)
    user._wakeledger_role = role
    return role


_TOKEN_SALT = "wakeledger.api-token"  # noqa: S105  (a salt, not a secret)


@lru_cache(maxsize=4)
def _token_hmac(secret: str) -> "hmac.HMAC":
    # salted_hmac's HMAC before any message: its key derived from the salt
    # and SECRET_KEY, built once per secret instead of on every request.
    return salted_hmac(_TOKEN_SALT, b"", secret=secret, algorithm="sha256")


def token_digest(token: str) -> str:
    """``salted_hmac("wakeledger.api-token", token, SECRET_KEY, sha256)``.

    Keyed with SECRET_KEY: a stolen table of digests cannot be checked
    offline without it. Rotating SECRET_KEY invalidates every token (the
    cache is keyed by the secret)."""
    mac = _token_hmac(settings.SECRET_KEY).copy()
    mac.update(token.encode())
    return mac.hexdigest()


def issue_token(user: AbstractBaseUser) -> str:
    """Create a token ``wl_<prefix>_<secret>`` for ``user`` and return it; only
    the prefix and the digest are stored, so it is never retrievable again."""
    prefix = "".join(secrets.choice(_ALPHABET) for _ in range(8))
    token = f"wl_{prefix}_{secrets.token_urlsafe(32)}"
    ApiToken.objects.create(user=user, prefix=prefix, digest=token_digest(token))
    return token


def idempotency_retention() -> timedelta:
    return timedelta(hours=settings.WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS)


def prune_idempotency_records(now: datetime | None = None) -> int:
    """Delete idempotency records older than the retention. Returns how many.

    What ``ledger prune`` and the scheduled task (scheduling.maintenance) run.
    A record deleted while its attempt still runs cannot be completed by it
    (the conditional UPDATE finds no row), so that attempt rolls back."""
    cutoff = (now or clock.now()) - idempotency_retention()
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=cutoff).delete()
    return deleted


def prune_mcp_leases(now: datetime | None = None, batch: int = 500) -> int:
    """Delete ``McpLease`` rows (the ``/mcp`` lease shelf) that no lease stands
    behind any more: not written for the idempotency retention, and their
    goal's projection no longer holds the row's lease (another generation,
    no lease: released, paused, ended), or that lease expired over the
    retention ago, or the goal is gone. Returns how many.

    Why: a row is deleted when its caller releases the lease or learns it
    lost it; a goal that never ends, left by a connector that never calls
    again, would keep its rows for ever. A row pruned too soon costs only a
    new ``take_lease``: it is no secret and no record (the token derives
    again from what the events keep). Run with the idempotency prune."""
    cutoff = (now or clock.now()) - idempotency_retention()
    deleted, after = 0, 0
    while True:
        rows = list(McpLease.objects.filter(updated_at__lt=cutoff, pk__gt=after)
                    .order_by("pk").values_list("pk", "goal_id", "generation")[:batch])
        if not rows:
            return deleted
        after = rows[-1][0]
        ids = {_uuid(goal_id) for _, goal_id, _ in rows} - {None}
        live = {gid: (state.get("lease") or {}).get("generation")
                for gid, state in Goal.objects.filter(id__in=ids, lease_expires_at__gte=cutoff)
                .values_list("id", "state")}
        stale = [pk for pk, goal_id, generation in rows
                 if live.get(_uuid(goal_id)) != generation]
        deleted += McpLease.objects.filter(pk__in=stale).delete()[0]


def _uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


# ---------------------------------------------------------------- failures counted per client

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
        address = client_address(self.request) if self.request else "unknown"
        per_user, per_address = login_failures(), login_failures_by_address()
        subject = f"{username}\n{address}"
        for window, key in ((per_user, subject), (per_address, address)):
            wait = window.locked_for(key)
            if wait:
                logger.warning("admin login refused: locked out (%s from %s)",
                                        username or "-", address)
                raise forms.ValidationError(
                    self.error_messages["locked_out"], code="locked_out",
                    params={"minutes": max(1, math.ceil(wait / 60))})
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            failures = per_user.record(subject)
            per_address.record(address)
            logger.warning("admin login failed for %s from %s (%d in a row)",
                                    username or "-", address, failures)
            raise
        per_user.clear(subject)
        return cleaned
