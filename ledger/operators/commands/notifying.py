"""`ledger notify`: the notification pass run from outside the scheduler.

The scheduler-silent alarm cannot come from the scheduler it is about, so an
operator runs this from cron (or a systemd timer) every few minutes, or
keeps ``ledger notify --every 60`` running (the Procfile's ``watch``): it
records the scheduler's flip (silent, or back), reminders and the digest, and
delivers what is due. Thin: parse, call ``ledger.services.notifications``, print.
"""

import logging
import signal
import threading
import time
from typing import Any

from django.conf import settings

from ledger.operators.commands.base import Shell, positive
from ledger.services import notifications

# The watch is a service (make run's `watch`, a systemd unit): its lines are
# log lines in the format of every other process's (WAKELEDGER_LOG_FORMAT).
logger = logging.getLogger("ledger.watch")


def add(actions: Any) -> None:
    notify = actions.add_parser(
        "notify", help="Tell humans now: the scheduler-silent alarm, reminders, the digest, "
                       "and every notification due (run it from cron: the scheduler cannot "
                       "report its own silence).")
    notify.add_argument("--channels", action="store_true",
                        help="only list the configured channels (redacted) and their routing")
    notify.add_argument("--every", type=positive, metavar="SECONDS",
                        help="keep running: one pass every SECONDS until SIGTERM or SIGINT "
                             "(the Procfile's `watch`; a systemd service instead of cron)")


class Notifying(Shell):
    def handle_notify(self, channels: bool = False, every: int | None = None,
                      **_: Any) -> None:
        if every is not None and not channels:
            return self._watch(every)
        if channels:
            listed = notifications.channel_list()
            for channel in listed:
                self.stdout.write(f"{channel['ref']:20} {channel['redacted']}  "
                                  f"{channel['routing'] or 'everything'}")
            self.stdout.write(f"{len(listed)} channel(s)")
            return
        done = notifications.run_pass()
        counts = notifications.counts_by_outcome()
        self.stdout.write(f"scheduler {done['scheduler']}; {done['sent']} notification(s) sent "
                          f"now; totals: {counts['sent']} sent, {counts['failed']} failed, "
                          f"{counts['pending']} pending")

    def _watch(self, every: int) -> None:
        stopped = threading.Event()
        # SIGTERM (make run's supervisor, systemd) or Ctrl-C: the round under
        # way finishes (a send is never cut between its claim and its mark),
        # then the loop ends and the process exits 0.
        before = {signum: signal.signal(signum, lambda *_: stopped.set())
                  for signum in (signal.SIGTERM, signal.SIGINT)}
        logger.info("watching: a notification pass every %ss (SIGTERM or Ctrl-C stops)", every)
        last: list[str] = []
        began = time.monotonic()

        def report(done: dict[str, Any]) -> None:
            status = done["scheduler"]
            # Started beside the scheduler (make run, a fresh database), the
            # watch's first rounds find no sweep yet: the cluster's first look
            # at its schedules comes about 40 s after its start. That is news
            # only once it lasts as long as a silence would.
            if (status == "never_ran" and not done["sent"]
                    and time.monotonic() - began < settings.WAKELEDGER_SCHEDULER_SILENT_SECONDS):
                return
            # A line when something happened, not one a minute for nothing.
            if done["sent"] or [status] != last:
                logger.log(logging.INFO if status == "ok" else logging.WARNING,
                           "scheduler %s; %s notification(s) sent", status, done["sent"])
                last[:] = [status]

        try:
            rounds = notifications.watch(every, stopped, report)
        finally:  # called in-process (call_command): the caller's handlers again
            for signum, handler in before.items():
                signal.signal(signum, handler)
        logger.info("stopped after %s pass(es)", rounds)
