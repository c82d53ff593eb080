"""JSON lines (``WAKELEDGER_LOG_FORMAT=json``): one object a line, for a log
shipper, with python-json-logger.

The redaction filter rewrites a record's message before any formatter sees
it; a JSON line also carries the record's extra attributes (Django's
``django.request`` passes the request object, whose text holds the query
string), so every string value of the line is redacted again here.

Every process writes one of the two formats (docs/operators.md, "Logs"):
Django's and django-q2's loggers through LOGGING (logconfig.py), gunicorn's
error and access logs (gunicorn_conf.py), ``make run``'s own lines (run.py),
which reads no settings, so the formats live here and not in logconfig.py.
"""

import logging
from typing import Any

from pythonjsonlogger.json import JsonFormatter

from ledger.project.redact import redact

FIELDS = ("asctime", "levelname", "name", "request_id", "message")
# The text line: the same fields, in the same order.
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"
FORMATS = ("text", "json")


def formatter(form: str) -> logging.Formatter:
    """The formatter of ``form`` (text or json) for a handler built by hand."""
    return JsonLines() if form == "json" else logging.Formatter(TEXT_FORMAT)


class JsonLines(JsonFormatter):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("fmt", " ".join(f"%({field})s" for field in FIELDS))
        kwargs.setdefault("rename_fields", {"asctime": "time", "levelname": "level",
                                            "name": "logger"})
        kwargs.setdefault("datefmt", "%Y-%m-%dT%H:%M:%S%z")
        super().__init__(*args, **kwargs)

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        return {key: _clean(value) for key, value in log_data.items()}


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: _clean(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(item) for item in value]
    if isinstance(value, int | float | bool) or value is None:
        return value
    return redact(str(value))
