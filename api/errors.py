"""Every API error is an RFC 9457 problem document, from this one handler.

``{"type", "title", "status", "detail", "code"}`` plus ``errors`` (per field)
for validation and any machine-readable context a rule attached (for example
``current_generation`` with ``lease_lost``). The ``code`` is stable; clients
and the CLI switch on it.
"""

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from ledger.domain import DomainError

PROBLEM_TYPE = "urn:wakeledger:problem:{code}"
PROBLEM_CONTENT_TYPE = "application/problem+json"

# domain code -> HTTP status
STATUS_BY_CODE = {
    "validation_error": 400,
    "malformed_json": 400,
    "lease_required": 400,
    "unauthenticated": 401,
    "forbidden": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "not_acceptable": 406,
    "lease_lost": 409,
    "lease_held": 409,
    "goal_terminal": 409,
    "goal_blocked": 409,
    "not_started": 409,
    "progress_regressed": 409,
    "artifact_conflict": 409,
    "workspace_bound": 409,
    "session_bound": 409,
    "version_conflict": 409,
    "idempotency_in_flight": 409,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "idempotency_conflict": 422,
    "approval_pending": 409,
    "budget_exhausted": 409,
    "throttled": 429,
    "internal_error": 500,
}

TITLES = {
    "validation_error": "The request is not valid.",
    "malformed_json": "The body is not valid JSON.",
    "lease_required": "This call must carry the lease.",
    "unauthenticated": "Authentication is required.",
    "forbidden": "Not allowed.",
    "not_found": "Not found.",
    "method_not_allowed": "Method not allowed.",
    "not_acceptable": "Not acceptable.",
    "lease_lost": "The lease is no longer yours.",
    "lease_held": "Someone else holds the lease.",
    "goal_terminal": "The goal has ended.",
    "goal_blocked": "The goal is blocked and needs an operator.",
    "not_started": "The goal has not started.",
    "progress_regressed": "Progress went backwards without a reason.",
    "artifact_conflict": "An artifact would be overwritten blindly.",
    "workspace_bound": "The workspace is bound to another goal.",
    "session_bound": "The session key is used by another goal.",
    "version_conflict": "The goal changed concurrently.",
    "idempotency_in_flight": "A request with this Idempotency-Key is still in flight.",
    "payload_too_large": "The body is too large.",
    "unsupported_media_type": "Send application/json.",
    "idempotency_conflict": "This Idempotency-Key was used with a different request.",
    "throttled": "Too many requests.",
    "internal_error": "Internal error.",
}


class Problem(exceptions.APIException):
    """An error raised by the API layer itself, with a stable code."""

    def __init__(self, code: str, detail: str, **extra: Any):
        self.code = code
        self.status_code = STATUS_BY_CODE[code]
        self.extra = extra
        super().__init__(detail)


def problem(code: str, detail: str, *, errors: dict[str, list[str]] | None = None,
            **extra: Any) -> dict[str, Any]:
    status_code = STATUS_BY_CODE.get(code, 400)
    body = {
        "type": PROBLEM_TYPE.format(code=code),
        "title": TITLES.get(code, "Error."),
        "status": status_code,
        "detail": detail,
        "code": code,
    }
    if errors:
        body["errors"] = errors
    body.update({k: v for k, v in extra.items() if k not in body})
    return body


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
            name = key if key != "non_field_errors" else ""
            path = f"{prefix}.{name}" if prefix and name else (prefix or name)
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
    else:
        return None
    for name, value in headers.items():
        result[name] = value
    return result


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
