"""CORS on the OAuth side of /mcp, for a browser-based MCP client that
discovers, registers and exchanges codes from its own page
(docs/agents.md, "Browser clients (CORS)"). Two wrappers, applied to the
views in api/mcp/urls.py and nowhere else:

- ``public``: the RFC 9728 and RFC 8414 metadata documents, readable from any
  Origin (``*``). They are the same for every caller, hold nothing private
  and are read without a credential, and a browser never sends cookies to a
  ``*`` answer; what a page may *do* is decided at the endpoints below.
- ``listed_origins``: registration, its management, the token endpoint and
  revocation. An Origin /mcp accepts (``guard.origin_allowed``: the site's
  own, SITE_URL, CSRF_TRUSTED_ORIGINS, WAKELEDGER_MCP_ALLOWED_ORIGINS) gets its
  preflight answered and every answer naming it; any other Origin gets no CORS
  header at all, so its page can read nothing.

Never ``Access-Control-Allow-Credentials``: these endpoints take their
credentials in the request (a code and verifier, a client secret, a
registration access token), never a cookie. The authorization endpoint gets
none of this: it is a page the person navigates to, not something fetched."""

import functools
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.cache import patch_vary_headers

from api.mcp import guard
from api.problems import PROBLEM_CONTENT_TYPE, problem

View = Callable[..., HttpResponse]

# What the MCP SDKs send to these endpoints: a form or JSON body, the client's
# secret by Basic auth or a registration access token, and (the TypeScript
# SDK, on discovery too) the protocol revision.
ALLOW_HEADERS = "Authorization, Content-Type, Accept, MCP-Protocol-Version"
METADATA_HEADERS = "Accept, MCP-Protocol-Version"
# A 401's challenge (a confidential client's bad secret) and the
# registration throttle's wait.
EXPOSE_HEADERS = "WWW-Authenticate, Retry-After"
MAX_AGE = "600"


def _preflight(request: HttpRequest) -> bool:
    return (request.method == "OPTIONS" and "Origin" in request.headers
            and "Access-Control-Request-Method" in request.headers)


def public(view: View) -> View:
    """Any Origin may read the document, and its preflight (a client that
    sends MCP-Protocol-Version on discovery needs one) is answered."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        if _preflight(request):
            response = HttpResponse(status=204)
            response["Access-Control-Allow-Methods"] = "GET"
            response["Access-Control-Allow-Headers"] = METADATA_HEADERS
            response["Access-Control-Max-Age"] = MAX_AGE
        else:
            response = view(request, *args, **kwargs)
        response["Access-Control-Allow-Origin"] = "*"
        return response

    return wrapped


def listed_origins(methods: str) -> Callable[[View], View]:
    """For a view answering ``methods`` (e.g. "POST"): a listed Origin's
    preflight answered (204) and its answers naming it; an unlisted Origin's
    preflight refused (403) and its requests answered as before but without a
    CORS header. The request itself is not refused: nothing here trusts a
    cookie, and a program may send any Origin."""

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
            listed = "Origin" in request.headers and guard.origin_allowed(request)
            if _preflight(request):
                if not listed:
                    response: HttpResponse = JsonResponse(
                        problem("forbidden", "This Origin may not call the OAuth endpoints "
                                "from a browser; see WAKELEDGER_MCP_ALLOWED_ORIGINS."),
                        status=403, content_type=PROBLEM_CONTENT_TYPE)
                    patch_vary_headers(response, ("Origin",))
                    return response
                response = HttpResponse(status=204)
                response["Allow"] = f"{methods}, OPTIONS"
                response["Access-Control-Allow-Methods"] = methods
                response["Access-Control-Allow-Headers"] = ALLOW_HEADERS
                response["Access-Control-Max-Age"] = MAX_AGE
            else:
                response = view(request, *args, **kwargs)
            if listed:
                response["Access-Control-Allow-Origin"] = request.headers["Origin"].strip()
                response["Access-Control-Expose-Headers"] = EXPOSE_HEADERS
            # Cached answers differ by Origin, whether or not this one had one.
            patch_vary_headers(response, ("Origin",))
            return response

        return wrapped

    return decorate
