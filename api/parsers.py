"""A stricter JSON parser for agents' requests.

DRF's JSONParser reads the body straight from the request stream, bypassing
Django's DATA_UPLOAD_MAX_MEMORY_SIZE, so the size limit is enforced here. It
also refuses what json.loads quietly accepts but no agent means: NaN and
Infinity, duplicate keys, a top level that is not an object.
"""

import json
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from api.problems import Problem


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


class StrictJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: dict[str, Any] | None = None) -> Any:
        limit = settings.WAKELEDGER_MAX_BODY_BYTES
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise Problem("payload_too_large", f"The body is larger than {limit} bytes.")
        try:
            data = json.loads(raw.decode("utf-8"), parse_constant=_no_constants,
                              object_pairs_hook=_no_duplicates)
        except UnicodeDecodeError:
            raise ParseError("The body is not UTF-8.") from None
        except RecursionError:
            raise ParseError("The body is nested too deeply.") from None
        except ValueError as exc:
            raise ParseError(f"The body is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ParseError("The body must be a JSON object.")
        return data
