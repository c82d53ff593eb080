"""Problem documents (RFC 9457): the codes, their statuses and titles.

Kept apart from ``api.errors`` (the DRF exception handler), because the JSON
parser raises ``Problem`` and DRF imports the parser while loading its views.
"""

from typing import Any

from rest_framework import exceptions

PROBLEM_TYPE = "urn:wakeledger:problem:{code}"
PROBLEM_CONTENT_TYPE = "application/problem+json"

# What every 401 answers in WWW-Authenticate: the exception handler for the
# problems it writes, api.auth for the ones DRF writes (here so that both can
# import it while DRF loads its views).
CHALLENGE = 'Bearer realm="wakeledger"'

# domain code -> HTTP status
STATUS_BY_CODE = {
    "validation_error": 400,
    "malformed_json": 400,
    "time_out_of_range": 400,
    "over_cap": 400,
    "receipt_due_at_mismatch": 400,
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
    "session_mismatch": 409,
    "version_conflict": 409,
    "idempotency_in_flight": 409,
    "jobs_running": 409,
    "not_recoverable": 409,
    "not_wakeable": 409,
    "job_terminal": 409,
    "not_sealed": 409,
    "checkpoint_unknown": 404,
    "cosignature_invalid": 400,  # 400, not 422: 422 is the Idempotency-Key's own conflict
    "length_required": 411,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "idempotency_conflict": 422,
    "approval_pending": 409,
    "budget_exhausted": 409,
    "throttled": 429,
    "internal_error": 500,
    "database_busy": 503,
    # Only django-q2's task asks a claim without the server's recent silence
    # (ledger.domain.leases.UnheardNeeded); a request never does. Were one
    # to, nothing was recorded and a retry is the answer.
    "unheard_needed": 503,
}

TITLES = {
    "validation_error": "The request is not valid.",
    "malformed_json": "The body is not valid JSON.",
    "time_out_of_range": "A date-time lies outside the range the ledger records.",
    "over_cap": "A duration is over this server's cap.",
    "receipt_due_at_mismatch": "The receipt's due_at is far from the slot the server prepared.",
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
    "session_mismatch": "That session is not the goal's registered session.",
    "version_conflict": "The goal changed concurrently.",
    "idempotency_in_flight": "A request with this Idempotency-Key is still in flight.",
    "jobs_running": "Blocking jobs are still running.",
    "not_recoverable": "The goal is not in a state an operator can recover.",
    "not_wakeable": "The goal is blocked or ended; a wake cannot resume it.",
    "job_terminal": "The job has already ended.",
    "not_sealed": "Not in a signed tree head yet; the log is sealed every few minutes.",
    "checkpoint_unknown": "No signed head has this checkpoint.",
    "cosignature_invalid": "No valid cosignature of a witness this server knows.",
    "length_required": "The body must come with a Content-Length.",
    "payload_too_large": "The body is too large.",
    "unsupported_media_type": "Send application/json.",
    "idempotency_conflict": "This Idempotency-Key was used with a different request.",
    "throttled": "Too many requests.",
    "internal_error": "Internal error.",
    "database_busy": "The database is busy; nothing was recorded. Try again.",
    "unheard_needed": "The claim needs the server's recent silence; nothing was recorded. "
                      "Try again.",
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
