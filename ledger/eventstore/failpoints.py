"""Fail points: places where a test makes the process kill itself (SIGKILL).

``WAKELEDGER_FAILPOINT=<name>`` names the point; it is honoured only when the
settings enable fail points (``WAKELEDGER_FAILPOINTS_ENABLED``, never in
production), so a stray environment variable cannot take a server down.

The name is read once, when the process starts (the crash tests start their
children with it). A point on a hot path is guarded by ``ARMED`` at its call
site, ``if failpoints.ARMED: failpoints.reached(...)``: with none armed, as
in every production process, it costs one attribute read.
"""

import os
import signal

from django.conf import settings

ARMED = os.environ.get("WAKELEDGER_FAILPOINT") or None


def reached(name: str) -> None:
    if name == ARMED and getattr(settings, "WAKELEDGER_FAILPOINTS_ENABLED", False):
        os.kill(os.getpid(), signal.SIGKILL)
