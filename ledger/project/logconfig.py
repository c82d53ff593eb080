"""Django's LOGGING, from WAKELEDGER_LOG_LEVEL and WAKELEDGER_LOG_FORMAT."""

from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ledger.project.env import env_str
from ledger.project.jsonlogs import FORMATS, TEXT_FORMAT

LEVELS = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}


def logging_from_environment() -> dict[str, Any]:
    level = env_str("WAKELEDGER_LOG_LEVEL", "INFO").upper()
    if level not in LEVELS:
        raise ImproperlyConfigured(f"WAKELEDGER_LOG_LEVEL={level!r} is not a log level.")
    form = log_format()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "text": {"format": TEXT_FORMAT},
            "json": {"()": "ledger.project.jsonlogs.JsonLines"},
        },
        # Tokens never reach a log, whoever logs them (a query string in
        # django.server's request line, a library quoting a header). The
        # request id (ledger/project/requestid.py) goes on every record.
        "filters": {"redact": {"()": "ledger.project.redact.RedactSecrets"},
                    "request_id": {"()": "ledger.project.requestid.RequestIdFilter"},
                    "client_errors_are_info": {
                        "()": "ledger.project.logfilters.ClientErrorsAreInfo"},
                    "scheduler_chatter_is_debug": {
                        "()": "ledger.project.logfilters.SchedulerChatterIsDebug"},
                    "one_line_warning": {"()": "ledger.project.logfilters.OneLineWarning"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": form,
                                 "filters": ["request_id", "redact"]}},
        "root": {"handlers": ["console"], "level": level},
        # urllib3 logs every request line at DEBUG: a notification channel's
        # webhook path is often its secret (docs/notifications.md).
        # django-q2's routine lines are DEBUG (logfilters.py); a request for a
        # Host the site does not serve is the client's mistake: one WARNING line.
        "loggers": {"django.db.backends": {"level": "INFO"}, "urllib3": {"level": "INFO"},
                    "django.request": {"filters": ["client_errors_are_info"]},
                    "django-q": {"filters": ["scheduler_chatter_is_debug"]},
                    "django.security.DisallowedHost": {"filters": ["one_line_warning"]}},
    }


def log_format() -> str:
    """WAKELEDGER_LOG_FORMAT: text (one plain line) or json (one JSON object a
    line, for a log shipper); both carry the request id, both are redacted."""
    form = env_str("WAKELEDGER_LOG_FORMAT", "text")
    if form not in FORMATS:
        raise ImproperlyConfigured(f"WAKELEDGER_LOG_FORMAT={form!r} must be text or json.")
    return form
