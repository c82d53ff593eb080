"""How the API reads a request: the body it refuses before any view reads
it, the strict JSON parser, and content negotiation with the everyday
answer known up front.

- ``RefuseChunkedBodies`` (middleware): ``Transfer-Encoding: chunked`` under
  /api/ is a 411 problem.
- ``StrictJSONParser``: DRF's JSONParser reads the body straight from the
  request stream, bypassing Django's DATA_UPLOAD_MAX_MEMORY_SIZE, so the size
  limit is enforced here. It also refuses what json.loads quietly accepts but
  no agent means: NaN and Infinity, duplicate keys, a top level that is not
  an object.
- ``Negotiation``: DRF's, except for the request every agent sends (no
  ``Accept``, ``*/*`` or ``application/json``; no query string), answered
  JSON directly.
"""

import json
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework.exceptions import ParseError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import JSONParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

from api.problems import PROBLEM_CONTENT_TYPE, Problem, problem

JSON = "application/json"


class RefuseChunkedBodies:
    """``Transfer-Encoding: chunked`` under /api/ is a 411 problem.

    Django reads a body only as far as Content-Length says; a chunked request
    has none, so its body was read as empty and a POST ran as if sent ``{}``
    (a checkpoint "without fields" refused for the wrong reason, or an empty
    call that succeeded). Every client we know of can send a length."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        encoding = request.META.get("HTTP_TRANSFER_ENCODING", "")
        if "chunked" in encoding.lower() and request.path.startswith("/api/"):
            body = problem("length_required", "Send the body with a Content-Length; "
                           "Transfer-Encoding: chunked is not read.")
            return JsonResponse(body, status=body["status"], content_type=PROBLEM_CONTENT_TYPE)
        return self.get_response(request)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def strict_loads(raw: bytes) -> Any:
    """``raw`` read as JSON the strict way (UTF-8 only; no NaN, Infinity or
    duplicate keys; a nesting too deep for the parser is refused, not a
    RecursionError), or ValueError with a sentence for the caller. Shared by
    the REST parser and ``/mcp``, so both refuse the same bodies alike."""
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_no_constants,
                          object_pairs_hook=_no_duplicates)
    except UnicodeDecodeError:
        raise ValueError("The body is not UTF-8.") from None
    except RecursionError:
        raise ValueError("The body is nested too deeply.") from None
    except ValueError as exc:
        raise ValueError(f"The body is not valid JSON: {exc}") from None


class StrictJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: dict[str, Any] | None = None) -> Any:
        limit = settings.WAKELEDGER_MAX_BODY_BYTES
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise Problem("payload_too_large", f"The body is larger than {limit} bytes.")
        try:
            data = strict_loads(raw)
        except ValueError as exc:
            raise ParseError(str(exc)) from None
        if not isinstance(data, dict):
            raise ParseError("The body must be a JSON object.")
        return data


# What DRF answers for these when the first renderer is JSON: "*/*" (or no
# header, which DRF reads as "*/*") names the renderer's own type.
_EVERYDAY_ACCEPT = frozenset({"*/*", JSON})


class Negotiation(DefaultContentNegotiation):
    """DRF's negotiation would read the query string (building
    ``request.GET``), build the dict of every header, parse the media types
    and rank them, to pick the first renderer, JSON, every time (about 10 µs
    of CPU a request). The everyday headers get that answer directly, exactly
    as DRF words it; anything else (another type, parameters, ``?format=``)
    is DRF's."""

    def select_renderer(self, request: Request, renderers: list[BaseRenderer],
                        format_suffix: str | None = None) -> tuple[Any, str]:
        meta = request._request.META
        if (not format_suffix and renderers and renderers[0].media_type == JSON
                and not meta.get("QUERY_STRING")
                and meta.get("HTTP_ACCEPT", "*/*") in _EVERYDAY_ACCEPT):
            return renderers[0], JSON
        return super().select_renderer(request, renderers, format_suffix)
