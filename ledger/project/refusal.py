"""A refused setting stops start-up with one paragraph, not a traceback.

Every setting is read strictly (ledger/project/env.py, the notify URLs, the
dispatchers, the keys): a wrong one raises ImproperlyConfigured naming it. A
Python traceback of 20 to 60 lines around that one sentence reads like a crash
of the program rather than a mistake in its configuration, so `manage.py`
(every command, `make run`'s set-up, the scheduler, the watch) and gunicorn's
workers print the paragraph below and exit with ``EXIT_CODE``. The traceback
is still there when asked for: ``--traceback`` on a command, or
``WAKELEDGER_TRACEBACK=1`` (or ``DEBUG=1``) in the environment.
"""

import json
import os
import re
import sys
import time
from collections.abc import Sequence

from django.core.exceptions import ImproperlyConfigured

# The exit code of a refused setting: distinct from 1 (a failure of the work)
# and 2 (a busy port, a command-line mistake).
EXIT_CODE = 78  # EX_CONFIG in BSD's sysexits.h, which systemd also knows
_SETTING = re.compile(r"\b(?:WAKELEDGER_[A-Z0-9_]+|DATABASE_URL|SECRET_KEY|DEBUG|PORT|"
                      r"ALLOWED_HOSTS)\b")
_DEBUG = {"1", "true", "yes", "on"}


def wanted(argv: Sequence[str] = ()) -> bool:
    """Whether the traceback was asked for."""
    return "--traceback" in argv or any(
        os.environ.get(name, "").strip().lower() in _DEBUG
        for name in ("WAKELEDGER_TRACEBACK", "DEBUG"))


def paragraph(error: ImproperlyConfigured, program: str) -> str:
    """The refusal as an operator reads it: what was refused, which setting,
    what to do."""
    reason = " ".join(str(error).split()) or type(error).__name__
    named = _SETTING.search(reason)
    where = named.group(0) if named else "the setting it names"
    return (f"{program}: a setting was refused, so nothing was started.\n"
            f"  {reason}\n"
            f"  Correct {where} (docs/configuration.md lists every setting) and start "
            f"again; --traceback or WAKELEDGER_TRACEBACK=1 shows where it was raised.")


def tell(error: ImproperlyConfigured, program: str) -> None:
    """The paragraph on stderr; with WAKELEDGER_LOG_FORMAT=json, one JSON line
    with the log lines' fields (its message the paragraph), for the shipper."""
    text = paragraph(error, program)
    if os.environ.get("WAKELEDGER_LOG_FORMAT") == "json":
        text = json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "level": "CRITICAL",
                           "logger": "wakeledger.settings", "request_id": "-",
                           "message": text})
    print(text, file=sys.stderr, flush=True)


def refuse(error: ImproperlyConfigured, program: str) -> None:
    """Tell the refusal and exit with ``EXIT_CODE``."""
    tell(error, program)
    sys.exit(EXIT_CODE)
