"""The tokens the ledger hands out, and their digests.

Three are derived rather than random — an HMAC under SECRET_KEY of what names
them — so that the ledger stores only their SHA-256 digest and can still give
the same token again: a push dispatch's lease (derived from the goal and the
wake's occurrence, so the outbox row holds no secret), an idempotent request's
lease (from the caller, the key and the path, so a replay answers the same
token), and a blocking job's notify token (from the goal and the job).
"""

import hashlib
import hmac
import re
import uuid
from typing import Any

from ledger.access.derivation import derived
from ledger.domain import LeaseProof
from ledger.services import ids

LEASE_PREFIX = "wll_"
NOTIFY_PREFIX = "wlj_"
_NOTIFY_SHAPE = re.compile(r"wlj_([0-9a-f]{32})_[A-Za-z0-9_-]{43}")


def digest(token: str) -> str:
    """What the ledger keeps of a token: its SHA-256, in hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def random_lease() -> str:
    return f"{LEASE_PREFIX}{ids.new_token()}"


def dispatch_lease(goal_id: str, occurrence_id: str) -> str:
    """The lease a push dispatch hands over; the sender derives it again."""
    return LEASE_PREFIX + derived("dispatch-lease", str(goal_id), occurrence_id)


def replayable_lease(owner: str, key: str, path: str) -> str:
    """The lease of a request with an Idempotency-Key: its replay answers the same one."""
    return LEASE_PREFIX + derived("lease-token", owner, key, path)


def proof(lease: dict[str, Any] | None) -> LeaseProof | None:
    """A caller's ``{"token", "generation"}`` as the domain checks it (digest only)."""
    if not lease:
        return None
    return LeaseProof(digest(lease["token"]), lease["generation"])


# ------------------------------------------------------------------ notify tokens
# A CI system or a watcher reports a blocking job's end with it, holding
# neither the goal's lease nor an API token. It names its goal, so the
# endpoint needs no lookup table.


def notify_token(goal_id: str, job_id: str) -> str:
    goal = uuid.UUID(str(goal_id))
    return f"{NOTIFY_PREFIX}{goal.hex}_" + derived("job-notify", str(goal), job_id)


def goal_of(token: str) -> str | None:
    """The goal a well-formed notify token names (None: not a notify token)."""
    match = _NOTIFY_SHAPE.fullmatch(token or "")
    return str(uuid.UUID(match.group(1))) if match else None


def issued_for(token: str, job_id: str) -> bool:
    """Whether ``token`` is the one this server issued for ``job_id`` (of the
    goal the token names): checked without reading anything stored, so a
    made-up token gets the same answer whether its goal exists or not."""
    goal_id = goal_of(token)
    return goal_id is not None and hmac.compare_digest(notify_token(goal_id, job_id), token)
