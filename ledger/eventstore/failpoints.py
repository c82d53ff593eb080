"""Fail points: places where a test makes the process kill itself (SIGKILL).

``WAKELEDGER_FAILPOINT=<name>`` names the point; it is honoured only when the
settings enable fail points (``WAKELEDGER_FAILPOINTS_ENABLED``, never in
production), so a stray environment variable cannot take a server down.
"""

import os
import signal

from django.conf import settings


def reached(name: str) -> None:
    if getattr(settings, "WAKELEDGER_FAILPOINTS_ENABLED", False) and \
            os.environ.get("WAKELEDGER_FAILPOINT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
