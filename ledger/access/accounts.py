"""Who may call the API and as what: roles, API tokens and idempotency housekeeping.

Roles are Django groups: agent, auditor, operator.

- agent: sees and writes only its own goals (another agent's goal is a 404);
- auditor: reads everything, writes nothing;
- operator: what auditors do, plus the operator endpoints.
A superuser logged in to the admin counts as an operator.

Here rather than in ``api`` so that the ledger's operator commands and admin
and the scheduled housekeeping need nothing from the REST shell; ``api``
authenticates bearer tokens (api.tokens) with what this module defines.
"""

import hmac
import secrets
import string
import uuid
from datetime import datetime, timedelta
from functools import lru_cache

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.utils.crypto import salted_hmac

from ledger.access.models import ApiToken, IdempotencyRecord, McpLease
from ledger.eventstore import clock
from ledger.models import Goal

AGENT, AUDITOR, OPERATOR = "agent", "auditor", "operator"
ROLES = (AGENT, AUDITOR, OPERATOR)
# A user in several role groups has the first of these (api.tokens ranks
# them the same way in SQL).
PRIORITY = (OPERATOR, AUDITOR, AGENT)

_ALPHABET = string.ascii_letters + string.digits


def role_of(user: AbstractBaseUser | AnonymousUser | None) -> str | None:
    """The user's role, looked up once per user object: a bearer-token
    caller's comes with its token (api.tokens.authenticate fills the cache
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
