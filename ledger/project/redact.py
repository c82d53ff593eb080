"""Tokens never reach a log line.

Used twice: as a logging filter on our console handler (Django's and
django-q2's loggers, and django.server's request lines in development), and
by gunicorn's access log (gunicorn.conf.py), which prints the request line
with its query string. A client that sends its token as ``?token=`` is refused
(only the Authorization header authenticates), but the refused request is
still logged; the value is replaced, the parameter's name kept.
"""

import logging
import re
from typing import Any

REDACTED = "[redacted]"

# Query parameters whose value is a credential, whatever it looks like.
_SENSITIVE_PARAM = re.compile(
    r"(?i)([?&;](?:[a-z0-9_.-]*(?:token|secret|password|passwd|api[_-]?key|apikey|"
    r"auth|signature|sig|key|lease|session|code))=)[^&;#\s\"]*")
# Our own tokens and bearer credentials anywhere in a line.
_TOKENS = re.compile(r"\bwll?_[A-Za-z0-9_-]{6,}|(?i:\bBearer\s+)[A-Za-z0-9._~+/=-]{12,}")


def maybe_secret(text: str) -> bool:
    """Whether ``redact`` could change ``text``: whatever its patterns match
    contains a "=" (after a parameter's name), "wl" (our tokens) or "bearer"
    in any case. Most texts (35 access-log atoms a request, most log lines)
    contain none; three substring tests cost a tenth of the substitutions (and
    of one regular expression searching for the three)."""
    return "=" in text or "wl" in text or "bearer" in text.lower()


def redact(text: str) -> str:
    if not maybe_secret(text):
        return text
    return _substitute(text)


def _substitute(text: str) -> str:
    text = _SENSITIVE_PARAM.sub(lambda m: m.group(1) + REDACTED, text)
    return _TOKENS.sub(lambda m: REDACTED if not m.group(0).lower().startswith("bearer")
                       else "Bearer " + REDACTED, text)


class RedactSecrets(logging.Filter):
    """Rewrites a record's message (arguments merged) when it holds a secret."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken record is the handler's to report
            return True
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


_NEVER_LOGGED = ("{authorization}i", "{cookie}i", "{proxy-authorization}i",
                 "{http_authorization}e", "{http_cookie}e", "{http_proxy_authorization}e")


def gunicorn_atoms(atoms: dict[str, Any]) -> dict[str, Any]:
    """Gunicorn's access-log atoms, cleaned: whatever format an operator
    configures, credentials in the request line, query, referer or any header
    come out redacted, and the Authorization and Cookie headers not at all."""
    for name in _NEVER_LOGGED:
        if name in atoms:
            atoms[name] = REDACTED
    texts = [(name, value) for name, value in atoms.items() if isinstance(value, str)]
    # One look at them all (about 35 a request, the environ's included)
    # usually finds nothing to redact: 3 µs instead of 20.
    if maybe_secret("\n".join(value for _, value in texts)):
        for name, value in texts:
            atoms[name] = redact(value)
    return atoms
