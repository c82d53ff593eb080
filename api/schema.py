"""OpenAPI: the bearer-token scheme, and the answers every operation declares.

The served schema is a contract: schemathesis checks every status,
content type and body the server sends against it. Errors are RFC 9457
problem documents served as ``application/problem+json``, so each operation
declares them under that media type, one entry per status, listing the codes
that status can carry, and the response headers that status sends
(``Retry-After``, ``WWW-Authenticate``, ``Idempotent-Replayed``).
"""

from collections import defaultdict
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

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
# An Idempotency-Key (a malformed key is a validation_error). Every operation
# that takes one writes, so it may also find the database busy (503).
IDEMPOTENT = ("validation_error", "idempotency_in_flight", "idempotency_conflict",
              "database_busy")
# A query string checked by a serializer.
QUERY = ("validation_error",)


# Response headers, by the problem codes that send them.
# - Retry-After: the bad-token throttle (429) and a key that changed hands
#   (409 idempotency_in_flight: found taken, its record pruned before it was
#   read; api.errors sends it for any problem with retry_after_seconds),
#   and a write that could not get the database in time (503).
# - WWW-Authenticate: every 401 (RFC 9110 requires it; api.errors adds it).
RETRY_AFTER_CODES = frozenset({"throttled", "idempotency_in_flight", "database_busy"})
CHALLENGE_CODES = frozenset({"unauthenticated"})
# - Idempotent-Replayed: a stored answer given again. Only what the view's
#   post returned or raised is stored (api.idempotency): never the answers
#   DRF gives before the view runs (authentication, role, Accept, throttle),
#   nor a body that could not be read, nor the key's own conflicts.
NOT_REPLAYED_CODES = frozenset({*CALLER, "malformed_json", "payload_too_large",
                                "unsupported_media_type", "idempotency_conflict",
                                "idempotency_in_flight", "database_busy"})

RETRY_AFTER = "Retry-After"
WWW_AUTHENTICATE = "WWW-Authenticate"
REPLAYED = "Idempotent-Replayed"
_HEADER_TEXT = {
    RETRY_AFTER: "Seconds to wait before trying again (delta-seconds).",
    WWW_AUTHENTICATE: 'The scheme to authenticate with: `Bearer realm="wakeledger"`.',
    REPLAYED: "`true` when this is the stored answer to an earlier request with the "
              "same Idempotency-Key, given again; absent on a first answer.",
}
_HEADER_TYPE = {
    RETRY_AFTER: {"type": "integer", "minimum": 0},
    WWW_AUTHENTICATE: OpenApiTypes.STR,
    REPLAYED: {"type": "string", "enum": ["true"]},
}


class Answers(dict):
    """What ``responses`` returns: the answers keyed (status, media type), as
    drf-spectacular wants them, plus the headers each status sends, which
    drf-spectacular only takes as response parameters (``AnswerSchema``)."""

    def __init__(self, answers: dict[Any, Any], headers: list[OpenApiParameter]):
        super().__init__(answers)
        self.headers = headers


class AnswerSchema(AutoSchema):
    """The project's schema class (``DEFAULT_SCHEMA_CLASS``): adds the response
    headers ``responses`` computed to the operation's parameters, where
    drf-spectacular 0.27+ reads response headers from (``OpenApiParameter``
    with ``response=[statuses]``). So every view declares its headers by
    declaring its answers, in one place, and none can forget them."""

    def get_override_parameters(self) -> list[Any]:
        answers = self.get_response_serializers()
        return [*super().get_override_parameters(), *getattr(answers, "headers", ())]


def _header(name: str, statuses: list[int], *, required: bool) -> OpenApiParameter:
    return OpenApiParameter(name, _HEADER_TYPE[name], OpenApiParameter.HEADER,
                            required=required, description=_HEADER_TEXT[name],
                            response=sorted(statuses))


def _headers(ok: dict[int, Any], by_status: dict[int, list[str]]) -> list[OpenApiParameter]:
    """The response headers per status. A header is ``required`` on a status
    when every code of that status sends it, optional when only some do."""
    headers = []
    for name, codes in ((RETRY_AFTER, RETRY_AFTER_CODES), (WWW_AUTHENTICATE, CHALLENGE_CODES)):
        always = [st for st, names in by_status.items() if set(names) <= codes]
        sometimes = [st for st, names in by_status.items()
                     if set(names) & codes and st not in always]
        headers += [_header(name, statuses, required=required)
                    for statuses, required in ((always, True), (sometimes, False)) if statuses]
    # An operation that takes an Idempotency-Key (it can answer in flight)
    # replays its successes and the refusals its view raised.
    if any("idempotency_in_flight" in names for names in by_status.values()):
        replayed = [*ok, *(st for st, names in by_status.items()
                           if set(names) - NOT_REPLAYED_CODES)]
        headers.append(_header(REPLAYED, sorted(set(replayed)), required=False))
    return headers


def responses(ok: dict[int, Any], *codes: str, caller: tuple[str, ...] = CALLER
              ) -> Answers:
    """``ok`` (status -> serializer, served as application/json) plus one
    ``application/problem+json`` answer per status the problem ``codes`` map to,
    and the response headers each of those statuses sends.

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
    return Answers({**{(status, "application/json"): answer for status, answer in ok.items()},
                    **problems}, _headers(ok, by_status))
