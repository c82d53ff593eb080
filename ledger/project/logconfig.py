"""Django's LOGGING, from WAKELEDGER_LOG_LEVEL and WAKELEDGER_LOG_FORMAT."""

from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ledger.project.env import env_str

LEVELS = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}


def logging_from_environment() -> dict[str, Any]:
    level = env_str("WAKELEDGER_LOG_LEVEL", "INFO").upper()
    if level not in LEVELS:
        raise ImproperlyConfigured(f"WAKELEDGER_LOG_LEVEL={level!r} is not a log level.")
    # text (one plain line) or json (one JSON object a line, for a log
    # shipper); both carry the request id and both are redacted.
    form = env_str("WAKELEDGER_LOG_FORMAT", "text")
    if form not in {"text", "json"}:
        raise ImproperlyConfigured(f"WAKELEDGER_LOG_FORMAT={form!r} must be text or json.")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "text": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
            "json": {"()": "ledger.project.jsonlogs.JsonLines"},
        },
        # Tokens never reach a log, whoever logs them (a query string in
        # django.server's request line, a library quoting a header). The
        # request id (ledger/project/requestid.py) goes on every record.
        "filters": {"redact": {"()": "ledger.project.redact.RedactSecrets"},
                    "request_id": {"()": "ledger.project.requestid.RequestIdFilter"},
                    "client_errors_are_info": {
                        "()": "ledger.project.logfilters.ClientErrorsAreInfo"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": form,
                                 "filters": ["request_id", "redact"]}},
        "root": {"handlers": ["console"], "level": level},
        # urllib3 logs every request line at DEBUG: a notification channel's
        # webhook path is often its secret (docs/notifications.md).
        "loggers": {"django.db.backends": {"level": "INFO"}, "urllib3": {"level": "INFO"},
                    "django.request": {"filters": ["client_errors_are_info"]}},
    }
