"""`ledger` actions: stop, recover, wake, approve, doctor, alerts: an operator's acts.

The arguments (``add``) and the handlers (``Acts``, mixed into the command
in ledger/management/commands/ledger.py). Thin: parse, call, print."""

import getpass
from typing import Any

from django.core.management.base import CommandError

from ledger.domain import DomainError
from ledger.eventstore import clock
from ledger.models import Goal
from ledger.operators import doctor, terminal
from ledger.operators.commands.base import Exit, Shell
from ledger.services import alerts, operators

# Goals `ledger alerts` prints unless told otherwise; the total is always printed,
# and how many were left out.
ALERTS_SHOWN = 200


def add(actions: Any) -> None:
    """stop, recover, wake, doctor, approve, alerts: an operator's acts."""
    for name, text in (
            ("stop", "Stop a goal for good."),
            ("recover", "Recover a blocked goal (new continuation budget)."),
            ("wake", "Wake a goal now: end a pause early and resume it as its wake would.")):
        act = actions.add_parser(name, help=text)
        act.add_argument("goal_id", metavar="GOAL_ID")
        act.add_argument("--reason", required=True)
        act.add_argument("--operator", default=getpass.getuser(),
                         help="who acts (default: the OS user)")
    doctor_parser = actions.add_parser(
        "doctor", help="Is the machinery intact: the scheduler's heartbeat and sweeper row, "
                       "goals past their deadline, wake rows checked by content.")
    doctor_parser.add_argument("goal_ids", nargs="*", metavar="GOAL_ID")
    doctor_parser.add_argument("--fix", action="store_true",
                               help="repair first: recreate missing or exhausted rows, "
                                    "delete orphaned ones, restore the sweeper (each an "
                                    "event on its goal)")
    approve = actions.add_parser("approve", help="Approve (or --reject) an approval gate.")
    approve.add_argument("goal_id", metavar="GOAL_ID")
    approve.add_argument("gate")
    approve.add_argument("--reject", action="store_true")
    approve.add_argument("--note", default="")
    approve.add_argument("--operator", default=getpass.getuser())
    alerts_parser = actions.add_parser(
        "alerts", help="Goals that need a human, oldest first, and their total (exit 1 when "
                       "any, or when the scheduler is not running).")
    shown = alerts_parser.add_mutually_exclusive_group()
    shown.add_argument("--limit", type=int, default=ALERTS_SHOWN, metavar="N",
                       help=f"show the N oldest (default {ALERTS_SHOWN}); the last line says "
                            "how many more there are")
    shown.add_argument("--all", action="store_true", dest="show_all",
                       help="show every goal that needs a human")


class Acts(Shell):
    def handle_stop(self, goal_id: str, reason: str, operator: str, **_: Any) -> None:
        self._act("stop", goal_id, operator, reason)

    def handle_recover(self, goal_id: str, reason: str, operator: str, **_: Any) -> None:
        self._act("recover", goal_id, operator, reason)

    def handle_approve(self, goal_id: str, gate: str, reject: bool, note: str, operator: str,
                       **_: Any) -> None:
        self._act("reject" if reject else "approve", goal_id, operator, note, gate)

    def handle_wake(self, goal_id: str, reason: str, operator: str, **_: Any) -> None:
        self._act("wake", goal_id, operator, reason)

    def handle_doctor(self, goal_ids: list[str], fix: bool = False, **_: Any) -> None:
        ids = self._valid(goal_ids) if goal_ids else None
        if fix:
            for line in doctor.fix(ids, actor="operator"):
                self.stdout.write(f"fixed: {line}")
        # Kept as the dashboard's newest pass unless --fix just kept its own
        # (what it found before repairing, and what it did).
        found = list(doctor.findings(ids)) if fix else doctor.check(ids)
        for finding in found:
            where = f"goal {finding.goal_id}" if finding.goal_id else "scheduler"
            self.stdout.write(f"{where}: {finding.problem}: {finding.detail}")
        counted = doctor.listing(Goal.objects.filter(pk__in=ids) if ids
                                 else Goal.objects.all())
        if counted.waiting:
            self.stdout.write(f"{counted.waiting} goal(s) need a human: see `ledger alerts` "
                              "(`--all` shows every one)")
        if found:
            raise CommandError(f"{len(found)} problem(s) found")
        # Said only because it was checked: the findings went over every
        # active goal (none overdue, none unlisted), the counts are SQL.
        within = counted.active - counted.listed
        self.stdout.write(
            f"no problems: the scheduler runs, every wake has its row, and each of the "
            f"{counted.active} active goal(s) is within its deadline ({within}) or listed "
            f"in `ledger alerts` ({counted.listed})")

    def _act(self, act: str, goal_id: str, operator: str, reason: str, gate: str = "") -> None:
        """The operator's act, the same use case as the API's and the admin's."""
        [goal_id] = self._valid([goal_id])
        try:
            acted = operators.act(act, goal_id, operator=operator, reason=reason, gate=gate)
        except DomainError as error:
            raise CommandError(f"{error.code}: {error.detail}") from None
        if acted.claim:
            self.stdout.write(f"goal {goal_id}: {terminal.woken(acted.claim)}")
            return
        state = acted.state
        reason = f"/{state.reason}" if state.reason else ""
        self.stdout.write(f"goal {goal_id}: {state.status}{reason}")

    def handle_alerts(self, limit: int = ALERTS_SHOWN, show_all: bool = False,
                      **_: Any) -> None:
        """Exit 1 when anything needs a human, so a cron job or a CI check can page."""
        if limit < 0:
            raise CommandError("--limit must be 0 or more")
        now = clock.now()
        health = alerts.scheduler_health(now)
        if health["status"] != "ok":
            self.stdout.write(f"scheduler {health['status']}: {health['why']}")
        listed = alerts.needing_a_human(Goal.objects.all(), now)
        # The total is counted, never the length of what is printed: a goal
        # past the limit is a number on the last line, not gone.
        total = listed.count()
        shown = 0
        for goal in (listed if show_all else listed[:limit]).iterator(chunk_size=500):
            row = alerts.row(goal, now)
            self.stdout.write(f"{terminal.when(row['since'])} UTC  {row['id']}  {row['status']:8} "
                              f"{row['reason'] or '-':24} {row['goal_key']} @ "
                              f"{row['workspace']}: {row['why']}")
            shown += 1
        self.stdout.write(f"{total} goal(s) need a human")
        if total > shown:
            self.stdout.write(f"{total - shown} more not shown (these are the {shown} oldest): "
                              "`ledger alerts --all`, or GET /api/v1/alerts page by page")
        if total or health["status"] != "ok":
            raise Exit(f"{total} goal(s) need a human"
                       + ("" if health["status"] == "ok" else
                          f"; the scheduler is {health['status']}"), returncode=1)

