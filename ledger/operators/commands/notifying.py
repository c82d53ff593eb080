"""`ledger notify`: the notification pass run from outside the scheduler.

The scheduler-silent alarm cannot come from the scheduler it is about, so an
operator runs this from cron (or a systemd timer) every few minutes: it
records the scheduler's flip (silent, or back), reminders and the digest, and
delivers what is due. Thin: parse, call ``ledger.services.notifications``, print.
"""

from typing import Any

from ledger.operators.commands.base import Shell
from ledger.services import notifications


def add(actions: Any) -> None:
    notify = actions.add_parser(
        "notify", help="Tell humans now: the scheduler-silent alarm, reminders, the digest, "
                       "and every notification due (run it from cron: the scheduler cannot "
                       "report its own silence).")
    notify.add_argument("--channels", action="store_true",
                        help="only list the configured channels (redacted) and their routing")


class Notifying(Shell):
    def handle_notify(self, channels: bool = False, **_: Any) -> None:
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
