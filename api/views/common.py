"""What every view of the REST shell shares: the roles, the API's base URL,
the pagination of goal lists, and the OpenAPI pieces several operations
declare. Who asks (``caller``) is api.auth's; the lease proof a fenced call
brings is ``ledger.services.tokens.proof``. No rule lives here."""

from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiParameter
from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.views import APIView

from api.auth import HasRole
from api.problems import PROBLEM_CONTENT_TYPE, Problem
from api.schema import BODY, GOAL, IDEMPOTENT
from ledger.access.accounts import AGENT, AUDITOR, OPERATOR
from ledger.project import siteurl

READERS = (AGENT, AUDITOR, OPERATOR)


def api_url(request: Request) -> str:
    """This server's API base URL, for answers that tell a host what to call."""
    return siteurl.api_url(request)


# The problems each kind of operation declares beside its own (api.schema.responses).
WRITE = (*GOAL, *BODY, *IDEMPOTENT, "goal_terminal", "version_conflict")
FENCED_BODY = (*GOAL, *BODY, "lease_required", "lease_lost", "not_started", "goal_terminal",
               "goal_blocked", "version_conflict")
FENCED = (*FENCED_BODY, *IDEMPOTENT)

LEASE_LOST_EXAMPLE = OpenApiExample(
    "lease_lost", response_only=True, status_codes=["409"], media_type=PROBLEM_CONTENT_TYPE,
    value={
        "type": "urn:wakeledger:problem:lease_lost", "title": "The lease is no longer yours.",
        "status": 409, "detail": "lease generation 1 is stale; the current one is 2",
        "code": "lease_lost", "errors": {"lease.generation": ["lease generation 1 is stale; "
                                                               "the current one is 2"]},
        "current_generation": 2})
VALIDATION_EXAMPLE = OpenApiExample(
    "validation_error", response_only=True, status_codes=["400"],
    media_type=PROBLEM_CONTENT_TYPE, value={
        "type": "urn:wakeledger:problem:validation_error",
        "title": "The request is not valid.", "status": 400,
        "detail": "Some fields are not valid; see errors.", "code": "validation_error",
        "errors": {"progress_pct": ["Ensure this value is less than or equal to 100."]}})
IDEMPOTENCY = OpenApiParameter(
    "Idempotency-Key", {"type": "string", "minLength": 1, "maxLength": 255,
                        "pattern": "^[!-~]([ -~]*[!-~])?$"},
    OpenApiParameter.HEADER, required=False,
    description="Same key and body replays the first response; another body is 422.")
LEASE_EXAMPLE = {"token": "wll_…", "generation": 1}


class LedgerView(APIView):
    permission_classes = [HasRole]
    roles: dict[str, tuple[str, ...]] = {"GET": READERS}


class GoalPagination(CursorPagination):
    # created_at never changes, so a cursor never skips or repeats a goal.
    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200

    def decode_cursor(self, request: Request) -> Any:
        try:
            return super().decode_cursor(request)
        except NotFound:
            raise Problem("validation_error", "The cursor is not valid; start again "
                          "without one.", errors={"cursor": ["Invalid cursor."]}) from None
