"""What ``/mcp`` checks before a message is read: the Origin (DNS
rebinding) and the CORS answers a listed Origin gets, the body's size and
type, the bearer credential (an API token for scripts, an OAuth access token
for hosted connectors), and the calls per minute of one credential."""

import hashlib
import time
import urllib.parse

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.cache import patch_vary_headers

from api import auth
from api.mcp.inprocess import Principal
from api.problems import CHALLENGE, PROBLEM_CONTENT_TYPE, problem
from ledger.access import accounts
from ledger.project import siteurl

RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource/mcp"


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url.strip())
    return f"{parts.scheme}://{parts.netloc}".lower() if parts.scheme and parts.netloc else ""


def origin_allowed(request: HttpRequest) -> bool:
    """No Origin (a program, not a browser page) or a known one: this site's
    own, SITE_URL's, CSRF_TRUSTED_ORIGINS or WAKELEDGER_MCP_ALLOWED_ORIGINS.
    A page on another site, even one whose name resolves here (DNS
    rebinding), is refused before any credential is looked at."""
    given = request.headers.get("Origin")
    if given is None:
        return True
    own = {_origin(request.build_absolute_uri("/"))}
    if settings.SITE_URL:
        own.add(_origin(settings.SITE_URL))
    listed = [*settings.CSRF_TRUSTED_ORIGINS, *settings.WAKELEDGER_MCP_ALLOWED_ORIGINS]
    own.update(_origin(url) for url in listed)
    return given.strip().lower() in own - {""}


# What a browser-based MCP client sends and must read (the MCP transport's
# headers, the credential, and the challenge that starts OAuth discovery).
CORS_ALLOW_HEADERS = ("Authorization, Content-Type, Accept, Mcp-Session-Id, "
                      "Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID")
CORS_EXPOSE_HEADERS = "Mcp-Session-Id, WWW-Authenticate, Retry-After"
CORS_MAX_AGE = "600"


def preflight(request: HttpRequest) -> HttpResponse:
    """OPTIONS: a listed Origin's preflight answered (only listed Origins
    reach here: origin_allowed refused the others with no CORS header); from
    no Origin at all, what is allowed."""
    response = HttpResponse(status=204)
    response["Allow"] = "POST, OPTIONS"
    if request.headers.get("Origin") is not None:
        response["Access-Control-Allow-Methods"] = "POST"
        # Mcp-Param-* headers carry a tool's name: a browser asks for them by
        # name, and any such name is allowed.
        asked = request.headers.get("Access-Control-Request-Headers", "")
        params = [name.strip() for name in asked.split(",")
                  if name.strip().lower().startswith("mcp-param-")]
        response["Access-Control-Allow-Headers"] = ", ".join([CORS_ALLOW_HEADERS, *params])
        response["Access-Control-Max-Age"] = CORS_MAX_AGE
    return with_cors(request, response)


def with_cors(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """A response to an allowed browser Origin names it (never "*": the
    caller sends a credential), and lets the page read the headers MCP needs."""
    origin = request.headers.get("Origin")
    if origin is not None:
        response["Access-Control-Allow-Origin"] = origin.strip()
        response["Access-Control-Expose-Headers"] = CORS_EXPOSE_HEADERS
    patch_vary_headers(response, ("Origin",))
    return response


def json_content_type(request: HttpRequest) -> bool:
    """``application/json``, in UTF-8 if a charset is named (JSON-RPC over
    MCP's HTTP transport is nothing else)."""
    charset = (request.content_params or {}).get("charset", "utf-8").strip().lower()
    return (request.content_type or "").lower() == "application/json" and \
        charset in ("utf-8", "utf8")


def size_refusal(request: HttpRequest) -> tuple[str, str] | None:
    """A body without a length (chunked) or over WAKELEDGER_MAX_BODY_BYTES,
    refused before it is read."""
    if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
        return ("length_required", "Send the body with a Content-Length.")
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return ("validation_error", "Content-Length is not a number.")
    if length > settings.WAKELEDGER_MAX_BODY_BYTES:
        return ("payload_too_large",
                f"The body is over {settings.WAKELEDGER_MAX_BODY_BYTES} bytes.")
    return None


def resource_metadata_url(request: HttpRequest) -> str:
    return siteurl.base_url(request) + RESOURCE_METADATA_PATH


def unauthorized(request: HttpRequest, detail: str, error: str = "") -> HttpResponse:
    body = problem("unauthenticated", detail)
    response = JsonResponse(body, status=401, content_type=PROBLEM_CONTENT_TYPE)
    challenge = f'{CHALLENGE}, resource_metadata="{resource_metadata_url(request)}"'
    if error:
        challenge += f', error="{error}"'
    response["WWW-Authenticate"] = challenge
    return response


def authenticate(request: HttpRequest) -> tuple[Principal | None, HttpResponse | None]:
    """The caller the bearer credential names, or the refusal to send."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if not header or scheme.lower() != "bearer" or not token:
        return None, unauthorized(request, "Send `Authorization: Bearer <token>`: an API "
                                  "token, or an OAuth access token (see WWW-Authenticate).")
    address = accounts.client_address(request)
    window = accounts.bad_tokens()
    wait = window.locked_for(address)
    if wait:
        body = problem("throttled", "Too many requests with a bad token from this address; "
                       "see Retry-After.")
        response = JsonResponse(body, status=429, content_type=PROBLEM_CONTENT_TYPE)
        response["Retry-After"] = str(wait)
        return None, response
    principal = _api_token(token) or _oauth_token(token, request)
    if principal is None:
        failures = window.record(address)
        log = accounts.logger.warning if failures == window.limit else accounts.logger.info
        log("invalid /mcp token from %s (%d in %d s)", address, failures, window.seconds)
        return None, unauthorized(request, "The token is not valid (or expired, or was "
                                  "revoked).", error="invalid_token")
    return principal, None


def _api_token(token: str) -> Principal | None:
    found = auth.authenticate(token) if token.startswith("wl_") else None
    if found is None:
        return None
    return Principal(found.user, found, f"token:{found.pk}")


def _oauth_token(token: str, request: HttpRequest) -> Principal | None:
    from api.mcp import oauth

    return oauth.principal(token, oauth.mcp_resources(request))  # issued for /mcp only


def rate_limited(principal: Principal) -> int:
    """Seconds to wait when this credential has made its
    WAKELEDGER_MCP_CALLS_PER_MINUTE calls in the current minute, else 0.
    Counted in the shared cache (every web process), per minute of the clock."""
    limit = settings.WAKELEDGER_MCP_CALLS_PER_MINUTE
    now = time.time()
    minute = int(now // 60)
    holder = hashlib.sha256(principal.holder.encode()).hexdigest()[:32]
    key = f"wl:mcp-rate:{holder}:{minute}"
    cache.add(key, 0, timeout=120)
    try:
        count = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=120)
        count = 1
    if count > limit:
        return max(1, int(60 - now % 60))
    return 0

