"""``manage.py ledger <action>``: the operator's commands.

Each action is a thin shell: it parses arguments, calls the store or the
projection module, and prints. No rule lives here.
"""

import getpass
import secrets
import uuid
from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from api import alerts, tokens
from api.models import ApiToken
from api.roles import AGENT, ROLES, role_of
from ledger import clock, projection
from ledger.domain import DomainError
from ledger.domain.runs import Recover, ResolveApproval, Stop
from ledger.models import Goal
from ledger.progress import Progress
from scheduling import watchdogs


class Command(BaseCommand):
    help = ("Wake Ledger operator commands: replay, verify, agent, prune, stop, recover, "
            "approve, alerts, bootstrap.")

    def add_arguments(self, parser: ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

        replay = actions.add_parser(
            "replay", help="Fold every goal's events and compare with the stored projection.")
        replay.add_argument("goal_ids", nargs="*", metavar="GOAL_ID")
        mode = replay.add_mutually_exclusive_group()
        mode.add_argument("--check", action="store_true",
                          help="Exit 1 when any projection differs from its events.")
        mode.add_argument("--fix", action="store_true",
                          help="Rewrite differing projections from the events (never the events).")

        verify = actions.add_parser(
            "verify", help="Recompute every goal's hash chain; name the first broken link.")
        verify.add_argument("goal_ids", nargs="*", metavar="GOAL_ID")

        agent = actions.add_parser("agent", help="API tokens: create, list, revoke.")
        agent_actions = agent.add_subparsers(dest="agent_action", required=True,
                                             metavar="AGENT_ACTION")
        create = agent_actions.add_parser(
            "create", help="Create a user with a role and print a new API token once.")
        create.add_argument("name")
        create.add_argument("--role", choices=ROLES, default=AGENT)
        agent_actions.add_parser("list", help="List tokens (prefixes only) and roles.")
        revoke = agent_actions.add_parser("revoke", help="Revoke a token by its prefix.")
        revoke.add_argument("prefix")

        actions.add_parser(
            "prune", help="Delete idempotency records older than their 48 h retention.")

        for name, text in (("stop", "Stop a goal for good."),
                           ("recover", "Recover a blocked goal (new continuation budget).")):
            act = actions.add_parser(name, help=text)
            act.add_argument("goal_id", metavar="GOAL_ID")
            act.add_argument("--reason", required=True)
            act.add_argument("--operator", default=getpass.getuser(),
                             help="who acts (default: the OS user)")
        approve = actions.add_parser("approve", help="Approve (or --reject) an approval gate.")
        approve.add_argument("goal_id", metavar="GOAL_ID")
        approve.add_argument("gate")
        approve.add_argument("--reject", action="store_true")
        approve.add_argument("--note", default="")
        approve.add_argument("--operator", default=getpass.getuser())
        actions.add_parser("alerts", help="Goals that need a human, newest first.")

        actions.add_parser(
            "bootstrap",
            help="Create the first admin user (random password, printed once) and print the URL.")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        getattr(self, f"handle_{action}")(**options)

    # ------------------------------------------------------------------ replay

    def handle_replay(self, goal_ids: list[str], check: bool, fix: bool, **_: Any) -> None:
        ids = self._ids(goal_ids)
        bar = Progress(len(ids), "replay", self.stderr._out)
        reports = list(projection.replay(ids, fix=fix, progress=bar.advance))
        bar.close()
        for report in reports:
            verb = "fixed" if report.fixed else "differs"
            self.stdout.write(self.style.WARNING(f"goal {report.goal_id} {verb}:"))
            for d in report.differences:
                self.stdout.write(f"  {d.field}: stored={d.stored!r} replayed={d.replayed!r}")
        summary = f"replayed {len(ids)} goal(s): {len(reports)} differ"
        if fix:
            summary += f", {len(reports)} fixed"
        self.stdout.write(summary)
        if reports and check:
            raise CommandError(f"{len(reports)} projection(s) differ from their events",
                               returncode=1)

    # ------------------------------------------------------------------ verify

    def handle_verify(self, goal_ids: list[str], **_: Any) -> None:
        ids = self._ids(goal_ids)
        bar = Progress(len(ids), "verify", self.stderr._out)
        broken, events = 0, 0
        for report in projection.verify(ids, progress=bar.advance):
            events += report.events
            if report.broken:
                broken += 1
                self.stdout.write(self.style.ERROR(
                    f"goal {report.goal_id}: chain broken at seq {report.broken.seq} "
                    f"({report.broken.why})"))
        bar.close()
        self.stdout.write(f"verified {len(ids)} goal(s), {events} event(s): {broken} broken")
        if broken:
            raise CommandError(f"{broken} broken chain(s)", returncode=1)

    # ------------------------------------------------------------------ agent

    def handle_agent(self, agent_action: str, **options: Any) -> None:
        getattr(self, f"handle_agent_{agent_action}")(**options)

    def handle_agent_create(self, name: str, role: str, **_: Any) -> None:
        users = get_user_model()
        if not name or len(name) > 150 or not name.replace("-", "").replace("_", "").replace(
                ".", "").isalnum():
            raise CommandError("NAME must be 1-150 letters, digits, '-', '_' or '.'")
        user, created = users.objects.get_or_create(username=name)
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        current = role_of(user)
        if current not in (None, role):
            raise CommandError(f"{name} already has the role {current}; create another name")
        group, _ = Group.objects.get_or_create(name=role)
        user.groups.add(group)
        token = tokens.issue(user)
        # Printed once; only its prefix and an HMAC digest are stored.
        self.stdout.write(f"{role} {name}: API token (shown once, keep it secret):\n{token}")

    def handle_agent_list(self, **_: Any) -> None:
        for token in ApiToken.objects.select_related("user").order_by("user__username", "id"):
            state = "revoked" if token.revoked_at else "active"
            self.stdout.write(f"{token.prefix}  {token.user.get_username():30} "
                              f"{role_of(token.user) or '-':9} {state}  "
                              f"created {token.created_at:%Y-%m-%d %H:%M}")

    def handle_agent_revoke(self, prefix: str, **_: Any) -> None:
        updated = ApiToken.objects.filter(prefix=prefix, revoked_at__isnull=True).update(
            revoked_at=clock.now())
        if not updated:
            raise CommandError(f"no active token with prefix {prefix!r}")
        self.stdout.write(f"revoked {prefix}")

    # ------------------------------------------------------------------ prune

    def handle_prune(self, **_: Any) -> None:
        from api.idempotency import prune

        self.stdout.write(f"deleted {prune()} idempotency record(s) older than 48 h")

    # ------------------------------------------------------------------ operator acts

    def handle_stop(self, goal_id: str, reason: str, operator: str, **_: Any) -> None:
        self._act(goal_id, Stop(operator, reason), operator)

    def handle_recover(self, goal_id: str, reason: str, operator: str, **_: Any) -> None:
        self._act(goal_id, Recover(operator, reason), operator)

    def handle_approve(self, goal_id: str, gate: str, reject: bool, note: str, operator: str,
                       **_: Any) -> None:
        decision = "reject" if reject else "approve"
        self._act(goal_id, ResolveApproval(gate, decision, operator, note), operator)

    def _act(self, goal_id: str, command: Any, operator: str) -> None:
        [goal_id] = self._valid([goal_id])
        try:
            state = watchdogs.execute(goal_id, command, actor=operator).state
        except DomainError as error:
            raise CommandError(f"{error.code}: {error.detail}") from None
        reason = f"/{state.reason}" if state.reason else ""
        self.stdout.write(f"goal {goal_id}: {state.status}{reason}")

    def handle_alerts(self, **_: Any) -> None:
        rows = alerts.alerts(Goal.objects.all())
        for row in rows:
            self.stdout.write(f"{row['since'][:19]}  {row['id']}  {row['status']:8} "
                              f"{row['reason'] or '-':24} {row['goal_key']} @ "
                              f"{row['workspace']}: {row['why']}")
        self.stdout.write(f"{len(rows)} goal(s) need a human")

    # ------------------------------------------------------------------ bootstrap

    def handle_bootstrap(self, **_: Any) -> None:
        url = f"{settings.SITE_URL}{reverse('admin:index')}"
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            self.stdout.write(f"Wake Ledger admin: {url}")
            return
        password = secrets.token_urlsafe(18)
        try:
            users.objects.create_superuser("admin", email="", password=password)
        except ValidationError as exc:  # pragma: no cover - create_superuser validates little
            raise CommandError(str(exc)) from exc
        # Printed once, never stored: only Django's salted password hash is kept.
        self.stdout.write(
            "Created the first admin user. Save this password now; it is not shown again.\n"
            f"  URL:      {url}\n  user:     admin\n  password: {password}")

    # ------------------------------------------------------------------ helpers

    def _ids(self, selected: list[str]) -> list[str]:
        wanted = self._valid(selected)
        ids = projection.goal_ids(wanted)
        if wanted and len(ids) != len(set(wanted)):
            missing = sorted(set(wanted) - set(ids))
            raise CommandError(f"no such goal: {', '.join(missing)}")
        return ids

    @staticmethod
    def _valid(selected: list[str]) -> list[str]:
        out = []
        for value in selected:
            try:
                out.append(str(uuid.UUID(value)))
            except ValueError:
                raise CommandError(f"{value!r} is not a goal id (a UUID)") from None
        return out
