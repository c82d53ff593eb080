"""Notify tokens: a blocking job's own credential, shown once.

A CI system or a watcher reports the job's terminal status with it
(``POST /api/v1/jobs/{job_id}/status``) without holding the goal's lease or
an API token. The token names its goal (so the endpoint needs no lookup
table) and is an HMAC of the goal and the job under SECRET_KEY: derived, so an
idempotent replay of the track call can give it again while only its SHA-256
digest is stored (in the job's event).
"""

import base64
import hashlib
import hmac
import re
import uuid

from django.conf import settings

PREFIX = "wlj_"
_SHAPE = re.compile(r"wlj_([0-9a-f]{32})_[A-Za-z0-9_-]{43}")


def notify_token(goal_id: str, job_id: str) -> str:
    goal = uuid.UUID(str(goal_id))
    material = f"wakeledger.job-notify\n{goal}\n{job_id}".encode()
    digest = hmac.new(settings.SECRET_KEY.encode(), material, hashlib.sha256).digest()
    return f"{PREFIX}{goal.hex}_" + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def goal_of(token: str) -> str | None:
    """The goal a well-formed token names (None: not a notify token)."""
    match = _SHAPE.fullmatch(token or "")
    return str(uuid.UUID(match.group(1))) if match else None


def issued_for(token: str, job_id: str) -> bool:
    """Whether ``token`` is the one this server issued for ``job_id`` (of the
    goal the token names): checked without reading anything stored, so a
    made-up token gets the same answer whether its goal exists or not."""
    goal_id = goal_of(token)
    return goal_id is not None and hmac.compare_digest(notify_token(goal_id, job_id), token)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
