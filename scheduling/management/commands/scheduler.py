"""`manage.py scheduler`: django-q2's `qcluster`, stopped cleanly.

Process managers stop a service by signalling its whole process group
(Procfile runners such as honcho on Ctrl-C, systemd's default
KillMode=control-group). A `qcluster` whose sentinel and workers get SIGTERM
together with the main process deadlocks: the sentinel dies holding the lock
of the cluster's stop event, and the main process's signal handler then blocks
on it for ever after logging "stopping" (django-q2 issue #346). This launcher
runs `qcluster` in a session of its own, so group signals reach only the
launcher, and turns SIGTERM / SIGINT into one SIGTERM to the cluster's main
process, which stops its sentinel and workers in order. If the cluster has not
exited after --grace seconds (a task may still be running), its whole group is
killed.
"""

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

PR_SET_PDEATHSIG = 1
# Its lines are log lines, in the format of every other process's
# (WAKELEDGER_LOG_FORMAT: text or JSON), not bare text on stderr.
logger = logging.getLogger("scheduling.scheduler")


def _stop_with_parent() -> None:
    """In the cluster's process, before exec: if this launcher dies without
    passing a signal on (SIGKILL, a crash), the kernel sends the cluster the
    SIGTERM instead (Linux's parent-death signal), so it never runs orphaned
    in a session no process manager watches."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Command(BaseCommand):
    help = "Run the django-q2 cluster (qcluster) and stop it cleanly on SIGTERM/SIGINT."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--grace", type=float, default=None,
            help="Seconds to wait for a clean stop before killing the cluster "
                 "(default: the task timeout + 10).")

    def handle(self, *args: Any, **options: Any) -> None:
        grace = options["grace"]
        if grace is None:
            grace = settings.Q_CLUSTER["timeout"] + 10
        stop_requested: list[int] = []

        def request_stop(signum: int, frame: Any) -> None:
            stop_requested.append(signum)

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        cluster = subprocess.Popen(  # noqa: S603 (this interpreter, no shell)
            [sys.executable, "-m", "django", "qcluster", "--settings", settings.SETTINGS_MODULE],
            start_new_session=True, preexec_fn=_stop_with_parent)
        while cluster.poll() is None and not stop_requested:
            time.sleep(0.2)
        if cluster.returncode is not None:
            # The cluster died on its own (kill -9, a crash): its sentinel and
            # workers would run on orphaned beside the cluster the process
            # manager restarts, so its group goes first; then exit as it did.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(cluster.pid, signal.SIGKILL)
            code = cluster.returncode
            logger.error("the cluster (pid %s) died (%s)", cluster.pid,
                         f"signal {-code}" if code < 0 else f"exit code {code}")
            # A signal's death as a shell reports it (128 + N), not -N & 0xff.
            sys.exit(128 - code if code < 0 else code or 1)
        logger.info("stopping the cluster (pid %s)", cluster.pid)
        cluster.send_signal(signal.SIGTERM)
        try:
            cluster.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            logger.warning("the cluster did not stop within %g s; killing it", grace)
            os.killpg(cluster.pid, signal.SIGKILL)
            cluster.wait()
        else:
            # Stray children (a worker the sentinel lost) go with the group.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(cluster.pid, signal.SIGKILL)
        sys.exit(0)
