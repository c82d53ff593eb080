"""Idempotency-Key on every POST.

Same key + same request replays the first status and body; same key with a
different request is 422 ``idempotency_conflict``; a key whose first request
is still running is 409 ``idempotency_in_flight``. Keys are per caller and
kept ``WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS`` (48 by default; ``ledger
prune``, scheduled by ``scheduling.maintenance``, deletes older records).

A replayed lease grant must hand back the same lease token, yet no raw token
may be stored. So a lease token issued under an Idempotency-Key is derived
(HMAC of the caller, the key and the path under SECRET_KEY) rather than
random: the stored response holds a placeholder, and a replay derives the
token again.

The record is created "in flight" in a transaction of its own, so a
concurrent retry can see it. Each attempt owns the record by a random
attempt id, written when it takes the key; once ``LOCK_SECONDS`` have passed
without an answer, a retry takes the record over with an attempt id of its
own (the first attempt is presumed dead). The response is stored by a
conditional UPDATE (this owner, this key, *my* attempt, still in flight) in
the same transaction as the events the command appended. If that UPDATE
finds no row, another attempt owns the key now: the whole transaction rolls
back, so an attempt that stalled past its lock never commits its events
beside the retry's, and its caller gets 409 ``idempotency_in_flight``.
Time only decides when a retry may take over; which attempt commits is
decided by the database.
"""

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import wraps
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from rest_framework.request import Request
from rest_framework.response import Response

from api.models import IdempotencyRecord
from api.problems import Problem
from ledger import clock, failpoints

HEADER = "Idempotency-Key"
MAX_KEY = 255
LOCK_SECONDS = 60


TOKEN_PLACEHOLDER = "(derived on replay)"  # noqa: S105  (a marker, not a secret)


def lease_token(request: Request) -> str:
    """A new raw lease token: derived when the request carries an
    Idempotency-Key (so a replay can give it again), random otherwise."""
    key = getattr(request, "idempotency_key", None)
    if key is None:
        return f"wll_{secrets.token_urlsafe(32)}"
    return _derive(str(request.user.get_username()), key, request.path)


def _derive(owner: str, key: str, path: str) -> str:
    material = f"wakeledger.lease-token\n{owner}\n{key}\n{path}".encode()
    digest = hmac.new(settings.SECRET_KEY.encode(), material, hashlib.sha256).digest()
    return "wll_" + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _without_token(data: Any) -> Any:
    if isinstance(data, dict) and isinstance(data.get("lease"), dict) \
            and "token" in data["lease"]:
        return {**data, "lease": {**data["lease"], "token": TOKEN_PLACEHOLDER}}
    if isinstance(data, dict) and data.get("notify_token"):
        # A job's notify token is derived from its goal and job (api.jobtokens).
        return {**data, "notify_token": TOKEN_PLACEHOLDER}
    return data


def _with_token(data: Any, owner: str, key: str, path: str) -> Any:
    if isinstance(data, dict) and isinstance(data.get("lease"), dict) \
            and data["lease"].get("token") == TOKEN_PLACEHOLDER:
        return {**data, "lease": {**data["lease"], "token": _derive(owner, key, path)}}
    if isinstance(data, dict) and data.get("notify_token") == TOKEN_PLACEHOLDER:
        from api.jobtokens import notify_token

        return {**data, "notify_token": notify_token(data["goal_id"], data["job"]["job_id"])}
    return data


def fingerprint(request: Request) -> str:
    body = json.dumps(request.data, sort_keys=True, separators=(",", ":"), default=str)
    material = f"{request.method}\n{request.path}\n{body}"
    return hashlib.sha256(material.encode()).hexdigest()


def _key(request: Request) -> str | None:
    key = request.headers.get(HEADER)
    if key is None:
        return None
    if not key or len(key) > MAX_KEY or not key.isascii() or not key.isprintable():
        raise Problem("validation_error",
                      f"{HEADER} must be 1 to {MAX_KEY} printable ASCII characters.")
    return key


@dataclass(frozen=True)
class Attempt:
    """The record this attempt owns: the key, and the attempt id it wrote."""

    owner: str
    key: str
    attempt: str


class Superseded(Exception):
    """Another attempt took the key over while this one ran."""


def _superseded() -> Problem:
    return Problem("idempotency_in_flight",
                   "This attempt took longer than the Idempotency-Key's lock and another "
                   "attempt with the same key took over; nothing from this attempt was "
                   "recorded. Retry to get the other attempt's answer.",
                   retry_after_seconds=1)


def _begin(owner: str, key: str, digest: str, path: str) -> Attempt | Response:
    """Claim the key, or return the stored response to replay."""
    now = clock.now()
    mine = secrets.token_hex(16)
    with transaction.atomic():
        record = (IdempotencyRecord.objects.select_for_update()
                  .filter(owner=owner, key=key).first())
        if record is None:
            try:
                with transaction.atomic():
                    IdempotencyRecord.objects.create(
                        owner=owner, key=key, fingerprint=digest, created_at=now,
                        locked_until=now + timedelta(seconds=LOCK_SECONDS), attempt=mine)
                    return Attempt(owner, key, mine)
            except IntegrityError:
                raise Problem("idempotency_in_flight",
                              "A request with this Idempotency-Key is in flight; retry later.",
                              retry_after_seconds=1) from None
        if record.fingerprint != digest:
            raise Problem("idempotency_conflict",
                          "This Idempotency-Key was first used with a different request.")
        if record.status_code is not None:
            body = _with_token(json.loads(record.response), owner, key, path)
            replay = Response(body, status=record.status_code)
            replay["Idempotent-Replayed"] = "true"
            if record.status_code >= 400:
                replay.content_type = "application/problem+json"
            return replay
        if record.locked_until > now:
            wait = max(1, int((record.locked_until - now).total_seconds()))
            raise Problem("idempotency_in_flight",
                          "A request with this Idempotency-Key is in flight; retry later.",
                          retry_after_seconds=wait)
        # The first attempt died or stalled past its lock: take the key over.
        # If it is still alive, its answer can no longer be stored, so its
        # events roll back (see _complete).
        record.locked_until = now + timedelta(seconds=LOCK_SECONDS)
        record.attempt = mine
        record.save(update_fields=["locked_until", "attempt"])
        return Attempt(owner, key, mine)


def _complete(attempt: Attempt, response: Response) -> None:
    """Store the answer if this attempt still owns the key; else raise
    Superseded (inside the command's transaction, which then rolls back)."""
    stored = IdempotencyRecord.objects.filter(
        owner=attempt.owner, key=attempt.key, attempt=attempt.attempt,
        status_code__isnull=True,
    ).update(status_code=response.status_code,
             response=json.dumps(_without_token(response.data)))
    if stored != 1:
        raise Superseded


def idempotent(method: Callable[..., Response]) -> Callable[..., Response]:
    """Wrap a view's ``post``. The view gets ``request.idempotency_key``."""

    @wraps(method)
    def wrapper(view: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = _key(request)
        request.idempotency_key = key
        if key is None:
            return method(view, request, *args, **kwargs)
        begun = _begin(str(request.user.get_username()), key, fingerprint(request),
                       request.path)
        if isinstance(begun, Response):
            return begun
        try:
            with transaction.atomic():
                response = method(view, request, *args, **kwargs)
                if response.status_code < 500:
                    _complete(begun, response)
            # Committed, the answer not yet written: a crash here is what the
            # client's retry with the same key must survive.
            failpoints.reached("api.after_commit")
            return response
        except Superseded:
            raise _superseded() from None
        except Exception as exc:
            # A refusal is a response too: the same request must get the same
            # refusal again, not a second try.
            response = view.handle_exception(exc)
            if response.status_code < 500:
                try:
                    with transaction.atomic():
                        _complete(begun, response)
                except Superseded:
                    raise _superseded() from None
            return response

    return wrapper


def retention() -> timedelta:
    return timedelta(hours=settings.WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS)


def prune(now: Any = None) -> int:
    """Delete records older than the retention. Returns how many.

    What ``ledger prune`` and the scheduled task (scheduling.maintenance) run.
    A record deleted while its attempt still runs cannot be completed by it
    (the conditional UPDATE finds no row), so that attempt rolls back."""
    cutoff = (now or clock.now()) - retention()
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=cutoff).delete()
    return deleted
