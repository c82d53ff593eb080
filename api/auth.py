"""Who asks: the bearer token a request names (in one query), the throttle on
bad tokens, role permissions for DRF, and the ``Caller`` a view hands its use
case.

Tokens are ``wl_<prefix>_<secret>``, issued by ``ledger.access.accounts.issue_token`` and
stored as prefix + HMAC-SHA256 digest."""

import hmac
from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Model
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from api.problems import CHALLENGE
from ledger.access import accounts
from ledger.access.accounts import AGENT, OPERATOR, PRIORITY, role_of, token_digest
from ledger.access.models import ApiToken
from ledger.services.goals import Caller

_NO_DIGEST = "0" * 64


# The user's fields the lookup reads; every other field of the user it
# returns is deferred (loaded from the database if something asks for it).
_BOOLEANS = {"is_active", "is_superuser"}
_USER_FIELDS = {"id", "username", *_BOOLEANS}


@cache
def _user_model() -> type[Model]:
    return get_user_model()


def _loaded(model: type[Model], values: dict[str, object]) -> Model:
    """An instance of ``model`` as read from the database, holding ``values``;
    every other field deferred (loaded on first use): ``Model.from_db``, as
    the ORM makes it from a row."""
    names = [f.attname for f in model._meta.concrete_fields if f.attname in values]
    return model.from_db(DEFAULT_DB_ALIAS, names, [values[name] for name in names])


@cache
def _user_fields() -> tuple[str, ...]:
    # In the model's order: Model.from_db pairs values with concrete fields in order.
    return tuple(f.attname for f in get_user_model()._meta.concrete_fields
                 if f.attname in _USER_FIELDS)


@cache
def _lookup_sql() -> str:
    """One statement: the live token with that prefix, its user, and the
    user's best role among its groups (an index into roles.PRIORITY, NULL for
    none), read from the tables as they are now: a revoked token, a
    deactivated user or a changed group membership shows on the next request.
    Names come from the models, so a swapped table name cannot go stale here."""
    user_model = get_user_model()
    token_meta, user_meta = ApiToken._meta, user_model._meta
    groups = user_model._meta.get_field("groups")
    through = groups.remote_field.through._meta
    group_meta = groups.related_model._meta
    q = connection.ops.quote_name

    def col(meta, name: str) -> str:
        return q(meta.get_field(name).column)

    through_user = q(groups.m2m_column_name())
    through_group = q(groups.m2m_reverse_name())
    rank = " ".join(f"WHEN %s THEN {i}" for i in range(len(PRIORITY)))
    users = ", ".join(f"u.{col(user_meta, name)}" for name in _user_fields())
    # Names from the models, quoted; every value is a parameter.
    return (
        f"SELECT t.{col(token_meta, 'id')}, t.{col(token_meta, 'digest')}, {users}, "  # noqa: S608
        f"(SELECT MIN(CASE g.{col(group_meta, 'name')} {rank} END) "
        f"FROM {q(through.db_table)} ug JOIN {q(group_meta.db_table)} g "
        f"ON g.{col(group_meta, 'id')} = ug.{through_group} "
        f"WHERE ug.{through_user} = u.{col(user_meta, 'id')}) "
        f"FROM {q(token_meta.db_table)} t JOIN {q(user_meta.db_table)} u "
        f"ON u.{col(user_meta, 'id')} = t.{col(token_meta, 'user')} "
        f"WHERE t.{col(token_meta, 'prefix')} = %s AND t.{col(token_meta, 'revoked_at')} IS NULL"
    )


def authenticate(token: str) -> ApiToken | None:
    """The live token ``token`` names, with its (active) user attached, or None.

    One query, no ORM: the token, its user and the user's role come from one
    statement (``_lookup_sql``), uncached, so revoking a token, deactivating
    a user or changing their groups takes effect on the very next request.
    The user is a real user model instance holding only the columns read
    (``get_username()``, ``is_authenticated``, ``is_superuser``; any other
    field loads on first use), with its role already in ``role_of``'s cache.
    """
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != "wl" or len(parts[1]) != 8:
        return None
    with connection.cursor() as cursor:
        cursor.execute(_lookup_sql(), [*PRIORITY, parts[1]])
        row = cursor.fetchone()
    # Compare even when nothing was found, so timing does not tell whether a
    # prefix exists.
    expected = row[1] if row else _NO_DIGEST
    if not hmac.compare_digest(expected, token_digest(token)) or row is None:
        return None
    token_id, rank, names = row[0], row[-1], _user_fields()
    # SQLite answers 0/1 for booleans (the ORM would convert them).
    user = _loaded(_user_model(), {
        name: bool(value) if name in _BOOLEANS else value
        for name, value in zip(names, row[2:-1], strict=True)})
    if not user.is_active:
        return None
    # role_of's cache, filled from the same row (its rules: a superuser is an
    # operator; otherwise the first of PRIORITY among the user's groups).
    user._wakeledger_role = OPERATOR if user.is_superuser else (
        PRIORITY[rank] if rank is not None else None)
    found = _loaded(ApiToken, {"id": token_id, "user_id": user.pk, "prefix": parts[1]})
    found.user = user  # cached on the instance: no second query for it
    return found


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer":
            # A bare token (or another scheme) would otherwise be answered
            # "credentials were not provided", which hides the actual mistake.
            raise exceptions.AuthenticationFailed(
                "The Authorization header must be `Authorization: Bearer <token>`.")
        # An address that sent too many bad tokens is refused before its
        # token is looked at, valid or not: answering 200 to a good one would
        # keep the throttle an oracle for guessing.
        address = accounts.client_address(request)
        window = accounts.bad_tokens()
        wait = window.locked_for(address)
        if wait:
            raise exceptions.Throttled(
                wait=wait,
                detail="Too many requests with a bad token from this address; see Retry-After.")
        token = token.strip()
        found = authenticate(token) if token else None
        if found is None:
            failures = window.record(address)
            # Never the token itself: a bad token is often a good one mistyped.
            log = accounts.logger.warning if failures == window.limit else accounts.logger.info
            log("invalid API token from %s (%d in %d s%s)", address, failures,
                window.seconds, ", now throttled" if failures == window.limit else "")
            if not token:
                raise exceptions.AuthenticationFailed("The Bearer token is empty.")
            raise exceptions.AuthenticationFailed("The token is not valid (or was revoked).")
        return found.user, found

    def authenticate_header(self, request: Request) -> str:
        return CHALLENGE


class HasRole(permissions.BasePermission):
    """The view's ``roles`` maps an HTTP method to the roles allowed to call it."""

    message = "Your role may not do this."

    def has_permission(self, request: Request, view: Any) -> bool:
        method = request.method.upper()
        if method in ("HEAD", "OPTIONS"):
            method = "GET"  # a reader may ask for headers and metadata
        elif not hasattr(view, method.lower()):
            return True  # let DRF answer 405 method_not_allowed, not 403
        role = role_of(request.user)
        if role is None:
            if request.user and request.user.is_authenticated:
                self.message = "This user has no role (agent, auditor or operator)."
            return False
        return role in getattr(view, "roles", {}).get(method, ())


def actor(request: Request) -> str:
    return request.user.get_username()


def caller(request: Request) -> Caller:
    """Who asks: an agent sees only its own goals (checked by the store on the
    row it locks, so a use case costs no separate read: another agent's goal
    is a 404 before any rule)."""
    name = actor(request)
    return Caller(name, owner=name if role_of(request.user) == AGENT else None,
                  idempotency_key=getattr(request, "idempotency_key", None))
