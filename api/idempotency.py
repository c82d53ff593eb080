"""Idempotency-Key on every POST.

Same key + same request replays the first status and body; same key with a
different request is 422 ``idempotency_conflict``. Keys are per caller and
kept ``WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS`` (48 by default; ``ledger
prune``, scheduled by ``scheduling.maintenance``, deletes older records).

A replayed lease grant must hand back the same lease token, yet no raw token
may be stored. So a lease token issued under an Idempotency-Key is derived
(HMAC of the caller, the key and the path under SECRET_KEY) rather than
random: the stored response holds a placeholder, and a replay derives the
token again.

The record is written in the command's own transaction, or not at all, and
in one statement: the view runs with its store command inside the key's
transaction, then the key and its answer are inserted together (``INSERT …
ON CONFLICT DO NOTHING``) before the one COMMIT. So a request whose
process dies at any point before that commit leaves no trace, and its retry
simply runs; one that dies after it leaves its answer, which the retry
replays. When the insert finds the key taken — answered by another attempt,
or used for another request — this attempt's transaction is rolled back
whole, its command's events with it, and the request gets what is under the
key (``_taken``): the stored answer, or 422 ``idempotency_conflict``; 409
``idempotency_in_flight`` (retry after a second) only if the record was
pruned in between. Two attempts with the same key at once are serialized by
the database, never by time: on SQLite
the second cannot begin its write transaction until the first has committed
or rolled back; on PostgreSQL its command waits for the goal row the first
has locked (a start: for the start's advisory lock, store._serialize_starts),
and anything that got past those waits at the insert on the first's
uncommitted row of the unique index, which then inserts nothing (``ON
CONFLICT`` keeps that expected race out of the server's error log). Either
way the second finds the first's answer and replays it: a duplicate's
command may be evaluated, but nothing it did is ever committed, so the
command takes effect once. One statement per keyed request (until 7
December 2026 a claim before the command and an update after it:
docs/decisions.md), and no COMMIT of its own.

Only the key's digest (``key_digest``) is kept, in the record and in the
events; a key that looks like a credential is refused.
"""

import hashlib
import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.db import DatabaseError, connection, transaction
from rest_framework.request import Request
from rest_framework.response import Response

from api.problems import Problem
from api.serializers import validated
from ledger.access.models import IdempotencyRecord
from ledger.eventstore import clock, failpoints
from ledger.services import tokens
from ledger.services.inputs import looks_like_secret

HEADER = "Idempotency-Key"
_META_KEY = "HTTP_" + HEADER.upper().replace("-", "_")  # as WSGI names it
MAX_KEY = 255


TOKEN_PLACEHOLDER = "(derived on replay)"  # noqa: S105  (a marker, not a secret)


def lease_token(request: Request) -> str:
    """A new raw lease token: derived when the request carries an
    Idempotency-Key (so a replay can give it again), random otherwise."""
    key = getattr(request, "idempotency_key", None)
    if key is None:
        return tokens.random_lease()
    return tokens.replayable_lease(str(request.user.get_username()), key, request.path)


def _without_token(data: Any) -> Any:
    if isinstance(data, dict) and isinstance(data.get("lease"), dict) \
            and "token" in data["lease"]:
        return {**data, "lease": {**data["lease"], "token": TOKEN_PLACEHOLDER}}
    if isinstance(data, dict) and data.get("notify_token"):
        # A job's notify token is derived from its goal and job (tokens.notify_token).
        return {**data, "notify_token": TOKEN_PLACEHOLDER}
    return data


def _with_token(data: Any, owner: str, key: str, path: str) -> Any:
    if isinstance(data, dict) and isinstance(data.get("lease"), dict) \
            and data["lease"].get("token") == TOKEN_PLACEHOLDER:
        return {**data, "lease": {**data["lease"],
                                  "token": tokens.replayable_lease(owner, key, path)}}
    if isinstance(data, dict) and data.get("notify_token") == TOKEN_PLACEHOLDER:
        return {**data, "notify_token": tokens.notify_token(data["goal_id"],
                                                            data["job"]["job_id"])}
    return data


def fingerprint(request: Request) -> str:
    body = json.dumps(request.data, sort_keys=True, separators=(",", ":"), default=str)
    material = f"{request.method}\n{request.path}\n{body}"
    return hashlib.sha256(material.encode()).hexdigest()


def key_digest(key: str) -> str:
    """What the ledger keeps of an Idempotency-Key: ``sha256:<hex>`` of it.
    Never the key itself (an agent may paste anything into a header, and
    events are kept forever and shown to auditors); unkeyed, so the agent
    that sent a key can find its events by hashing it."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def _key(request: Request) -> str | None:
    """The request's Idempotency-Key as stored (its digest), or None."""
    # META, not request.headers: the first look at .headers builds a dict of
    # every header of the request, which cost more than the rest of this check.
    key = request.META.get(_META_KEY)
    if key is None:
        return None
    if not key or len(key) > MAX_KEY or not key.isascii() or not key.isprintable():
        raise Problem("validation_error",
                      f"{HEADER} must be 1 to {MAX_KEY} printable ASCII characters.")
    if looks_like_secret(key):
        # Only a digest is stored, but a credential in a header is a mistake
        # the agent should hear about (like one in an objective).
        raise Problem("validation_error",
                      f"{HEADER} looks like a credential; send a random id (a UUID).")
    return key_digest(key)


# The table name comes from the model's Meta, never from input.
_TABLE = IdempotencyRecord._meta.db_table
_SELECT = (f"SELECT fingerprint, status_code, response FROM {_TABLE} "  # noqa: S608
           "WHERE owner = %s AND key = %s")
# The key with its answer is inserted; a key already there (answered, or
# another request's) inserts nothing: the key is taken.
_COMPLETE = (f"INSERT INTO {_TABLE} (owner, key, fingerprint, status_code, "  # noqa: S608
             "response, created_at) VALUES (%s, %s, %s, %s, %s, %s) "
             "ON CONFLICT (owner, key) DO NOTHING")


def _complete(owner: str, key: str, digest: str, response: Response) -> bool:
    """Store the key with its answer inside the current transaction; False if
    the key is taken (answered by another attempt, perhaps while this one
    waited for it; or another request's)."""
    answer = json.dumps(_without_token(response.data))
    at = connection.ops.adapt_datetimefield_value(clock.now())
    with connection.cursor() as cursor:
        cursor.execute(_COMPLETE, [owner, key, digest, response.status_code, answer, at])
        return cursor.rowcount == 1


class _Taken(Exception):
    """The key is taken: answered, or used for another request."""


def _keyed(owner: str, key: str, digest: str, answer: Callable[[], Response]) -> Response:
    """Get the answer and store it under the key, in one transaction; _Taken
    (and nothing of this attempt kept) if the key turns out to be taken."""
    # The request's one unit of work: the use case's command joins this
    # transaction (ledger.services.caller.run), and any error rolls all of it back.
    with transaction.atomic():
        response = answer()
        if response.status_code >= 500:
            # Nothing half-done is kept under a key: its retry runs again.
            transaction.set_rollback(True)
            return response
        if not _complete(owner, key, digest, response):
            raise _Taken  # leaves the atomic block: the command's events go too
    return response


def _taken(owner: str, key: str, digest: str, path: str) -> Response:
    """What a request under a taken key gets: the stored answer replayed, or
    422 for another request."""
    with connection.cursor() as cursor:
        cursor.execute(_SELECT, [owner, key])
        record = cursor.fetchone()
    if record is None:  # pruned in between: rare enough to ask for a retry
        raise Problem("idempotency_in_flight", "The Idempotency-Key changed hands; retry.",
                      retry_after_seconds=1)
    stored_fingerprint, status_code, body = record
    if stored_fingerprint != digest:
        raise Problem("idempotency_conflict",
                      "This Idempotency-Key was first used with a different request.")
    replay = Response(_with_token(json.loads(body), owner, key, path), status=status_code)
    replay["Idempotent-Replayed"] = "true"
    if status_code >= 400:
        replay.content_type = "application/problem+json"
    return replay


def _replay_if_answered(owner: str, key: str, digest: str, path: str) -> Response | None:
    """The stored answer under the key when there is one for this request."""
    try:
        replay = _taken(owner, key, digest, path)
    except (Problem, DatabaseError):  # none, another request's, or the database failing
        return None
    return replay


View = Callable[..., Response]


def idempotent(serializer_class: type) -> Callable[[View], View]:
    """Wrap a view's ``post``, which gets the body validated by
    ``serializer_class`` as ``data`` and ``request.idempotency_key``.

    The body is validated before the key's transaction begins: validation
    reads nothing stored, and on SQLite that transaction holds the database's
    write lock from its first statement, so every other writer would wait for
    it. A body that fails validation is a refusal like any other, stored under
    the key (the same request gets the same 400 again)."""

    def decorate(method: View) -> View:
        @wraps(method)
        def wrapper(view: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
            key = _key(request)
            request.idempotency_key = key
            if key is None:
                data = validated(serializer_class, request.data)
                return method(view, request, *args, data=data, **kwargs)
            owner, path, digest = str(request.user.get_username()), request.path, \
                fingerprint(request)
            try:
                data = validated(serializer_class, request.data)
                response = _keyed(owner, key, digest,
                                  lambda: method(view, request, *args, data=data, **kwargs))
            except _Taken:
                return _taken(owner, key, digest, path)
            except Exception as exc:
                # A refusal is a response too: the same request must get the
                # same refusal again, not a second try. The command's
                # transaction rolled back; the refusal is stored in one of its own.
                refusal = view.handle_exception(exc)
                if refusal.status_code >= 500:
                    # A duplicate evaluates its command before it finds the
                    # key taken: an answer already stored beats its failure.
                    return _replay_if_answered(owner, key, digest, path) or refusal
                try:
                    return _keyed(owner, key, digest, lambda: refusal)
                except _Taken:
                    return _taken(owner, key, digest, path)
            # Committed, the answer not yet written: a crash here is what the
            # client's retry with the same key must survive.
            if failpoints.ARMED:
                failpoints.reached("api.after_commit")
            return response

        return wrapper

    return decorate
