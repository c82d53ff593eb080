"""Every API error is an RFC 9457 problem document, from this one handler.

``{"type", "title", "status", "detail", "code"}`` plus ``errors`` (per field)
for validation and any machine-readable context a rule attached (for example
``current_generation`` with ``lease_lost``). The ``code`` is stable; clients
and the CLI switch on it.
"""

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from api.problems import CHALLENGE, PROBLEM_CONTENT_TYPE, STATUS_BY_CODE, Problem, problem
from ledger.domain import DomainError
from ledger.eventstore import busy


def response(code: str, detail: str, **kwargs: Any) -> Response:
    body = problem(code, detail, **kwargs)
    return Response(body, status=body["status"], content_type=PROBLEM_CONTENT_TYPE)


_DRF_CODES: list[tuple[type[exceptions.APIException], str]] = [
    (exceptions.ParseError, "malformed_json"),
    (exceptions.NotAuthenticated, "unauthenticated"),
    (exceptions.AuthenticationFailed, "unauthenticated"),
    (exceptions.PermissionDenied, "forbidden"),
    (exceptions.NotFound, "not_found"),
    (exceptions.MethodNotAllowed, "method_not_allowed"),
    (exceptions.NotAcceptable, "not_acceptable"),
    (exceptions.UnsupportedMediaType, "unsupported_media_type"),
    (exceptions.Throttled, "throttled"),
]


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error dicts and lists -> {"field.sub[0]": ["message", …]}."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
                path = f"{prefix}[{key}]"  # a ListField child: artifacts[0].sha256
            elif key == "non_field_errors":
                path = prefix
            else:
                path = f"{prefix}.{key}" if prefix else key
            for k, v in _flatten(value, path).items():
                out.setdefault(k, []).extend(v)
    elif isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            out[prefix or "body"] = [str(item) for item in detail]
        else:
            for i, item in enumerate(detail):
                for k, v in _flatten(item, f"{prefix}[{i}]").items():
                    out.setdefault(k, []).extend(v)
    else:
        out[prefix or "body"] = [str(detail)]
    return out


def handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's EXCEPTION_HANDLER."""
    set_rollback()
    headers = {}
    if isinstance(exc, exceptions.APIException):
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))
    if isinstance(exc, DomainError):
        extra = {k: v for k, v in exc.extra.items() if v is not None}
        errors = {exc.field: [exc.detail]} if exc.field else None
        result = response(exc.code, exc.detail, errors=errors, **extra)
    elif isinstance(exc, Problem):
        result = response(exc.code, str(exc.detail), **exc.extra)
    elif isinstance(exc, exceptions.ValidationError):
        result = response("validation_error", "Some fields are not valid; see errors.",
                          errors=_flatten(exc.detail))
    elif isinstance(exc, exceptions.APIException):
        code = next((c for cls, c in _DRF_CODES if isinstance(exc, cls)), "validation_error")
        status_code = STATUS_BY_CODE.get(code, exc.status_code)
        result = response(code, str(exc.detail))
        result.status_code = status_code
        result.data["status"] = status_code
    elif isinstance(exc, Http404):
        result = response("not_found", str(exc) or "Not found.")
    elif isinstance(exc, RequestDataTooBig):
        result = response("payload_too_large", str(exc))
    elif isinstance(exc, DatabaseError) and busy.is_busy(exc):
        result = database_busy()
    else:
        return None
    wait = result.data.get("retry_after_seconds") if isinstance(result.data, dict) else None
    if "Retry-After" not in headers and isinstance(wait, int) and not isinstance(wait, bool):
        # A problem that says when to try again (a key still in flight) says
        # it in the header generic HTTP clients and proxies read, too.
        headers["Retry-After"] = str(max(0, wait))
    if result.status_code == 401 and "WWW-Authenticate" not in headers:
        # RFC 9110: a 401 must carry a challenge. DRF adds it for the API
        # token's failures; a Problem raised by a view (a job's notify token,
        # also a Bearer token) would go without.
        headers["WWW-Authenticate"] = CHALLENGE
    for name, value in headers.items():
        result[name] = value
    return result


def database_busy() -> Response:
    """A write that could not get the database within WAKELEDGER_DB_WAIT_SECONDS
    (SQLite's write lock, a goal's row lock on PostgreSQL): its transaction was
    rolled back, so nothing was recorded, and the same request (with the same
    Idempotency-Key) may simply be sent again. The driver's text stays in the
    server's log: it names tables and statements."""
    wait = busy.wait_seconds()
    return response("database_busy", "The database could not be written within "
                    f"{wait} s (another writer holds it). Nothing was recorded: send the same "
                    "request again after Retry-After.", retry_after_seconds=wait)


def not_found_view(request: HttpRequest, exception: Exception | None = None) -> Any:
    """handler404: problem JSON under /api/, Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse(problem("not_found", f"No endpoint at {request.path}."),
                            status=status.HTTP_404_NOT_FOUND, content_type=PROBLEM_CONTENT_TYPE)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def server_error_view(request: HttpRequest) -> Any:
    """handler500: never a bare HTML page for an API client."""
    if request.path.startswith("/api/"):
        return JsonResponse(problem("internal_error", "The server failed; nothing was recorded."),
                            status=500, content_type=PROBLEM_CONTENT_TYPE)
    from django.views.defaults import server_error

    return server_error(request)
