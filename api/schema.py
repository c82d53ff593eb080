"""OpenAPI: the bearer-token scheme, and the answers every operation declares.

The served schema is a contract (issue 13): schemathesis checks every status,
content type and body the server sends against it. Errors are RFC 9457
problem documents served as ``application/problem+json``, so each operation
declares them under that media type, one entry per status, listing the codes
that status can carry.
"""

from collections import defaultdict
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension
from drf_spectacular.utils import OpenApiResponse

from api.problems import PROBLEM_CONTENT_TYPE, STATUS_BY_CODE
from api.serializers import ProblemSerializer


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "api.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token from `manage.py ledger agent create NAME`.",
        }


class StrictRequestScheme(OpenApiSerializerExtension):
    """A request serializer that refuses unknown fields (400): the schema says
    so, or a client generated from it (and the fuzzer) would send extras."""

    target_class = "api.serializers.StrictSerializer"
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema = auto_schema._map_basic_serializer(self.target, direction)
        return {**schema, "additionalProperties": False}


# What any authenticated operation may answer, whatever it does: a missing or
# bad token, a role that may not, an Accept it cannot serve, an address
# throttled for bad tokens.
CALLER = ("unauthenticated", "forbidden", "not_acceptable", "throttled")
# A goal in the path: unknown, malformed or another agent's is 404.
GOAL = ("not_found",)
# A JSON body: the strict parser and the request serializers.
BODY = ("validation_error", "malformed_json", "payload_too_large", "unsupported_media_type")
# An Idempotency-Key (a malformed key is a validation_error).
IDEMPOTENT = ("validation_error", "idempotency_in_flight", "idempotency_conflict")
# A query string checked by a serializer.
QUERY = ("validation_error",)


def responses(ok: dict[int, Any], *codes: str, caller: tuple[str, ...] = CALLER
              ) -> dict[Any, Any]:
    """``ok`` (status -> serializer, served as application/json) plus one
    ``application/problem+json`` answer per status the problem ``codes`` map to.

    The caller's codes (``CALLER``) are always added; pass ``caller=`` for an
    operation that authenticates otherwise (a job's notify token).
    """
    by_status: dict[int, list[str]] = defaultdict(list)
    for code in dict.fromkeys((*caller, *codes)):  # ordered, once each
        by_status[STATUS_BY_CODE[code]].append(code)
    problems = {
        (status, PROBLEM_CONTENT_TYPE): OpenApiResponse(
            ProblemSerializer, description=", ".join(names))
        for status, names in sorted(by_status.items())
    }
    # Keyed (status, media type) like the problems: drf-spectacular takes the
    # smallest key, as a string, for the operation's main answer (its list-ness
    # and so its operationId), and "(200, …" sorts before "(401, …".
    return {**{(status, "application/json"): answer for status, answer in ok.items()},
            **problems}

