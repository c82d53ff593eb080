"""The browser's middleware, not run for a token-authenticated API request.

The request's lazy Django user and the messages framework serve the admin
(and an operator's browser session on the API). A request under
``/api/`` that carries an ``Authorization`` header is authenticated by that
header alone: DRF tries the bearer authentication first, and a header it
cannot accept is a 401 before the session authentication is reached. So
for such a request DRF replaces the lazy user with the token's and no
message is added or shown; building them anyway was about 10 µs of CPU per
request (docs/performance.md). Each class here is Django's own, subclassed
(the admin's system checks look for subclasses), and runs in full for every
other request, for every ASGI request, and for ``/api/`` without the header.
SessionMiddleware stays Django's, by its exact path: the deploy checks of
the session cookie look for that path, and a session that is never touched
costs little (its store is built, never read).
"""

from typing import Any

from django.contrib.auth.middleware import AuthenticationMiddleware as _Authentication
from django.contrib.messages.middleware import MessageMiddleware as _Messages
from django.http import HttpRequest

API_PREFIX = "/api/"


def token_api_request(request: HttpRequest) -> bool:
    """A request under /api/ with an Authorization header (any scheme: a
    scheme other than Bearer is a 401 too, never a session)."""
    return request.path.startswith(API_PREFIX) and bool(
        request.META.get("HTTP_AUTHORIZATION"))


class _BrowserOnly:
    get_response: Any
    async_mode: bool

    def __call__(self, request: HttpRequest) -> Any:
        if not self.async_mode and token_api_request(request):
            return self.get_response(request)
        return super().__call__(request)  # type: ignore[misc]


class AuthenticationMiddleware(_BrowserOnly, _Authentication):
    pass


class MessageMiddleware(_BrowserOnly, _Messages):
    pass
