"""Bearer-token authentication and role permissions for DRF."""

from typing import Any

from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from api import tokens
from api.problems import CHALLENGE
from ledger.access import throttle
from ledger.access.accounts import role_of


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
        address = throttle.client_address(request)
        window = throttle.bad_tokens()
        wait = window.locked_for(address)
        if wait:
            raise exceptions.Throttled(
                wait=wait,
                detail="Too many requests with a bad token from this address; see Retry-After.")
        token = token.strip()
        found = tokens.authenticate(token) if token else None
        if found is None:
            failures = window.record(address)
            # Never the token itself: a bad token is often a good one mistyped.
            log = throttle.logger.warning if failures == window.limit else throttle.logger.info
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
