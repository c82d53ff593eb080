"""``manage.py ledger <action>``: the operator's commands.

Each action is a thin shell: it parses arguments, calls the application layer or the
projection module, and prints. No rule lives here.
"""

import argparse
import getpass
import json
import os
import secrets
import sys
from argparse import ArgumentParser
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.urls import reverse

from ledger.access.accounts import (
    AGENT,
    AUDITOR,
    OPERATOR,
    ROLES,
    issue_token,
    prune_idempotency_records,
    role_of,
)
from ledger.access.models import ApiToken
from ledger.domain import DomainError, GoalState
from ledger.domain.vocabulary import DONE, REASONS, STATUSES
from ledger.eventstore import clock, projection
from ledger.log import export, log_audit, sealing, signing
from ledger.models import Event, Goal, TreeHead
from ledger.operators import alerts, demo, doctor, goalids, terminal
from ledger.operators.progress import Progress
from ledger.project import siteurl
from ledger.services import operators
from wakeledger_verify import heads

SHOW_LIMIT = 50  # events `ledger show` prints unless told otherwise
GOALS_LIMIT = 50
# Goals `ledger alerts` prints unless told otherwise; the total is always printed,
# and how many were left out.
ALERTS_SHOWN = 200


def ensure_user(name: str, role: str) -> AbstractBaseUser:
    """The user for an API caller (or the demo's agent), in its role's group.
    Shared by `agent create` and `demo`, so both make the same kind of user."""
    if not name or len(name) > 150 or not name.replace("-", "").replace("_", "").replace(
            ".", "").isalnum():
        raise CommandError("NAME must be 1-150 letters, digits, '-', '_' or '.'")
    user, created = get_user_model().objects.get_or_create(username=name)
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    current = role_of(user)
    if current not in (None, role):
        raise CommandError(f"{name} already has the role {current}; create another name")
    group, _ = Group.objects.get_or_create(name=role)
    user.groups.add(group)
    return user


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return number


def _reading(actions: Any) -> None:
    """goals, show, replay: what an operator reads."""
    goals = actions.add_parser("goals", help="A table of goals, most recently updated first.")
    goals.add_argument("--status", nargs="+", action="extend", choices=STATUSES,
                       metavar="STATUS", help=f"any of: {', '.join(STATUSES)}")
    goals.add_argument("--reason", type=str.upper, choices=REASONS, metavar="REASON",
                       help="e.g. BLOCKED_APPROVAL, INTERRUPTED_UNKNOWN")
    goals.add_argument("--agent")
    goals.add_argument("--limit", type=_positive, default=GOALS_LIMIT,
                       help=f"at most this many rows (default {GOALS_LIMIT})")

    show = actions.add_parser(
        "show", help="One goal: its projected state, then its timeline of events.")
    show.add_argument("goal_id", metavar="GOAL_ID",
                      help="a goal id, or the first 4+ hex digits of one (as `goals` shows)")
    how_many = show.add_mutually_exclusive_group()
    how_many.add_argument("--limit", type=_positive, default=SHOW_LIMIT,
                          help=f"the last N events (default {SHOW_LIMIT})")
    how_many.add_argument("--all", action="store_true", dest="every",
                          help="every event, streamed")

    replay = actions.add_parser(
        "replay", help="Fold every goal's events and compare with the stored projection.")
    replay.add_argument("goal_ids", nargs="*", metavar="GOAL_ID")
    mode = replay.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="Exit 1 when any projection differs from its events.")
    mode.add_argument("--fix", action="store_true",
                      help="Rewrite differing projections from the events (never the events).")


def _auditing(actions: Any) -> None:
    """verify, seal, head, key, export: the verifiable log."""
    verify = actions.add_parser(
        "verify", help="Recompute every goal's hash chain, check that it ends at the goal "
                       "row's version and head hash; name the first broken link.")
    verify.add_argument("goal_ids", nargs="*", metavar="GOAL_ID")
    verify.add_argument(
        "--against", metavar="HEAD_FILE",
        help="also prove the whole log still extends this head, kept earlier (the JSON "
             "of GET /api/v1/ledger/head or `ledger head`): exit 1 on any rewrite, "
             "deletion, truncation, insertion or rollback since")
    verify.add_argument("--key", action="append", default=[], metavar="PUBKEY_FILE",
                        help="a public key (PEM) to check heads' signatures with, beside "
                             "this server's own; repeatable (keys rotated away)")

    actions.add_parser(
        "seal", help="Put committed events into the verifiable log's tree and sign a "
                     "tree head (the scheduler does it every WAKELEDGER_SEAL_MINUTES).")
    actions.add_parser("head", help="Print the newest signed tree head as JSON (keep it: "
                                    "`verify --against` and `wakeledger-verify --head`).")
    actions.add_parser("key", help="Print the head-signing key's id and public key (PEM) "
                                   "for auditors to pin.")
    export = actions.add_parser(
        "export", help="Write a goal's verifiable export: its events, their inclusion "
                       "proofs, the signed head and the public key (wakeledger-verify "
                       "checks it offline).")
    export.add_argument("goal_id", metavar="GOAL_ID")
    export.add_argument("-o", "--output", metavar="FILE",
                        help="the bundle's file (default: standard output)")
    export.add_argument("--from-size", type=_positive, action="append", default=[],
                        metavar="N", help="add a consistency proof from an earlier head "
                                          "of N leaves (repeatable)")
    export.add_argument("--no-seal", action="store_true",
                        help="export against the newest head as it is, without sealing")


def _accounts(actions: Any) -> None:
    """agent, user, prune: who may call, and housekeeping."""
    agent = actions.add_parser("agent", help="API tokens: create, list, revoke.")
    agent_actions = agent.add_subparsers(dest="agent_action", required=True,
                                         metavar="AGENT_ACTION")
    create = agent_actions.add_parser(
        "create", help="Create users with a role and print a new API token for each, once.")
    create.add_argument("names", nargs="+", metavar="NAME")
    create.add_argument("--role", choices=ROLES, default=AGENT)
    agent_actions.add_parser("list", help="List tokens (prefixes only) and roles.")
    revoke = agent_actions.add_parser("revoke", help="Revoke a token by its prefix.")
    revoke.add_argument("prefix")

    user = actions.add_parser("user", help="Admin users for people: create.")
    user_actions = user.add_subparsers(dest="user_action", required=True,
                                       metavar="USER_ACTION")
    user_create = user_actions.add_parser(
        "create", help="Create a staff user (admin login) in the auditor or operator group.")
    user_create.add_argument("name")
    user_create.add_argument("--role", required=True, choices=(AUDITOR, OPERATOR))
    user_create.add_argument("--email", default="")
    user_create.add_argument("--generate", action="store_true",
                             help="generate a password and print it once (default: ask "
                                  "for one, twice)")

    actions.add_parser(
        "prune", help="Delete idempotency records older than their retention "
                      "(WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS).")


def _operator_acts(actions: Any) -> None:
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


def _setup(actions: Any) -> None:
    """demo, bootstrap."""
    demo_parser = actions.add_parser(
        "demo", help=f"Create a few realistic demo goals (agent {demo.AGENT}, "
                     f"workspaces under {demo.ROOT}/); does nothing if they exist.")
    demo_parser.add_argument("--again", action="store_true",
                             help="add another set even if demo goals exist")

    actions.add_parser(
        "bootstrap",
        help="Create the first admin user (random password, printed once) and print the URL.")


class Command(BaseCommand):
    help = ("Wake Ledger operator commands: goals, show, replay, verify, seal, head, key, "
            "export, agent, user, prune, stop, recover, approve, alerts, demo, bootstrap. "
            "GOAL_ID is a full id or its first 4+ hex digits (the 8 `goals` prints).")

    def add_arguments(self, parser: ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        for add in (_reading, _auditing, _accounts, _operator_acts, _setup):
            add(actions)
        # The description names every action from the parser itself, so an
        # action added above can never be missing from it (wake and doctor were).
        parser.description = (f"Wake Ledger operator commands: {', '.join(actions.choices)}. "
                              "GOAL_ID is a full id or its first 4+ hex digits (the 8 "
                              "`goals` prints).")


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

    def handle_verify(self, goal_ids: list[str], against: str | None, key: list[str],
                      **_: Any) -> None:
        if against:
            kept, keys = self._read_head(against), self._keys(key)
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
        findings = self._verify_log(kept, keys) if against else []
        if broken or findings:
            parts = [f"{broken} broken chain(s)"] if broken else []
            parts += [f"{len(findings)} problem(s) in the log"] if findings else []
            raise CommandError(", ".join(parts), returncode=1)

    def _verify_log(self, kept: dict[str, Any], keys: list[Any]) -> list[str]:
        report = log_audit.audit(kept, keys)
        for finding in report.findings:
            self.stdout.write(self.style.ERROR(f"log: {finding}"))
        for note in report.notes:
            self.stdout.write(f"log: note: {note}")
        verdict = "does NOT extend" if report.findings else "extends"
        self.stdout.write(f"log: {report.tree_size} leaves, root {report.root}; {verdict} the "
                          f"kept head of {report.kept_size} leaves; "
                          f"{report.heads_checked} stored head(s) checked")
        return report.findings

    @staticmethod
    def _read_head(path: str) -> dict[str, Any]:
        try:
            head = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise CommandError(f"cannot read the head file {path}: {error}") from None
        problem = heads.head_shape_error(head)
        if problem:
            raise CommandError(f"{path} is not a tree head: {problem}")
        return head

    @staticmethod
    def _keys(paths: list[str]) -> list[Any]:
        keys = []
        own = Path(settings.WAKELEDGER_SIGNING_KEY_FILE)
        if own.exists():
            keys.append(signing.signer(own).private_key.public_key())
        for path in paths:
            try:
                keys.append(heads.load_public_key(Path(path).read_text(encoding="utf-8")))
            except (OSError, ValueError) as error:
                raise CommandError(f"{path} is not an Ed25519 public key (PEM): "
                                   f"{error}") from None
        return keys

    # ------------------------------------------------------------------ the verifiable log

    def handle_seal(self, **_: Any) -> None:
        try:
            result = sealing.seal()
        except sealing.HorizonBusy as busy:
            raise CommandError(f"nothing sealed: {busy}; try again") from None
        if result.head is None:
            self.stdout.write(f"sealed {result.appended} event(s); the tree has "
                              f"{result.size} leaves, as the newest head says")
            return
        self.stdout.write(f"sealed {result.appended} event(s); signed head: size "
                          f"{result.head.size}, root {result.head.root}, key "
                          f"{result.head.key_id}")
        if settings.WAKELEDGER_HEAD_WITNESS_URL:
            self.stdout.write(f"witness {'took' if result.witnessed else 'did NOT take'} the "
                              "head")

    def handle_head(self, **_: Any) -> None:
        head = TreeHead.objects.order_by("-id").first()
        if head is None:
            raise CommandError("no signed head yet: run `ledger seal`")
        self.stdout.write(json.dumps(head.as_dict(), indent=2))

    def handle_key(self, **_: Any) -> None:
        key = signing.signer()
        self.stdout.write(f"key id: {key.key_id}\n{key.public_pem.rstrip()}")

    def handle_export(self, goal_id: str, output: str | None, from_size: list[int],
                      no_seal: bool, **_: Any) -> None:
        [pk] = self._valid([goal_id])
        if not no_seal:
            try:
                sealing.seal()
            except sealing.HorizonBusy as busy:
                self.stderr.write(f"not sealed ({busy}); exporting against the newest head")
        try:
            data = export.bundle(pk, from_sizes=from_size)
        except export.NothingToExport as error:
            raise CommandError(str(error)) from None
        text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        if output is None:
            self.stdout.write(text, ending="")
            return
        Path(output).write_text(text, encoding="utf-8")
        self.stdout.write(f"wrote {output}: goal {pk}, {len(data['events'])} event(s), head "
                          f"of {data['head']['size']} leaves; check it with "
                          f"`wakeledger-verify {output}`")

    # ------------------------------------------------------------------ agent

    def handle_agent(self, agent_action: str, **options: Any) -> None:
        getattr(self, f"handle_agent_{agent_action}")(**options)

    def handle_agent_create(self, names: list[str], role: str, **_: Any) -> None:
        # All or none: a bad name in the list leaves no half-made set behind.
        with transaction.atomic():
            issued = [(name, issue_token(ensure_user(name, role)))
                      for name in dict.fromkeys(names)]
        for name, token in issued:
            # Printed once; only its prefix and an HMAC digest are stored.
            self.stdout.write(f"{role} {name}: API token (shown once, keep it secret):\n{token}")

    # ------------------------------------------------------------------ user

    def handle_user(self, user_action: str, **options: Any) -> None:
        getattr(self, f"handle_user_{user_action}")(**options)

    def handle_user_create(self, name: str, role: str, email: str, generate: bool,
                           **_: Any) -> None:
        users = get_user_model()
        if users.objects.filter(username=name).exists():
            raise CommandError(f"a user named {name} exists already; choose another name")
        password = secrets.token_urlsafe(18) if generate else self._ask_password(name)
        with transaction.atomic():
            user = ensure_user(name, role)
            user.is_staff = True  # the admin is where auditors and operators work
            user.email = email
            user.set_password(password)
            user.save()
        self.stdout.write(f"created {role} {name} (staff); log in at {siteurl.admin_address()}")
        if generate:
            # Printed once, never stored: only Django's salted hash is kept.
            self.stdout.write(f"password (shown once, keep it secret): {password}")

    def _ask_password(self, name: str) -> str:
        if not sys.stdin.isatty():
            raise CommandError("no terminal to ask for a password on: run it in a terminal "
                               "or pass --generate")
        for _attempt in range(3):
            password = getpass.getpass(f"Password for {name}: ")
            if password != getpass.getpass("Password (again): "):
                self.stderr.write("The passwords differ; try again.")
                continue
            try:
                validate_password(password, get_user_model()(username=name))
            except ValidationError as error:
                self.stderr.write(" ".join(error.messages))
                continue
            return password
        raise CommandError("no password set after three tries")

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
        hours = settings.WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS
        deleted = prune_idempotency_records()
        self.stdout.write(f"deleted {deleted} idempotency record(s) older than {hours} h")

    # ------------------------------------------------------------------ operator acts

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
        found = list(doctor.findings(ids))
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
            self.stdout.write(f"goal {goal_id}: {acted.claim.outcome} "
                              f"({acted.claim.report.notes})")
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
            self.stdout.write(f"{row['since'][:19]}  {row['id']}  {row['status']:8} "
                              f"{row['reason'] or '-':24} {row['goal_key']} @ "
                              f"{row['workspace']}: {row['why']}")
            shown += 1
        self.stdout.write(f"{total} goal(s) need a human")
        if total > shown:
            self.stdout.write(f"{total - shown} more not shown (these are the {shown} oldest): "
                              "`ledger alerts --all`, or GET /api/v1/alerts page by page")
        if total or health["status"] != "ok":
            raise CommandError(f"{total} goal(s) need a human"
                               + ("" if health["status"] == "ok" else
                                  f"; the scheduler is {health['status']}"), returncode=1)

    # ------------------------------------------------------------------ goals, show

    def handle_goals(self, status: list[str] | None, reason: str | None, agent: str | None,
                     limit: int, **options: Any) -> None:
        query = Goal.objects.order_by("-updated_at", "id")
        if status:
            query = query.filter(status__in=status)
        if reason:
            query = query.filter(reason=reason)
        if agent:
            query = query.filter(agent=agent)
        rows = list(query[:limit])
        # Counting is one more query; only worth it when the limit cut the list.
        total = query.count() if len(rows) == limit else len(rows)
        more = f" of {total} (raise --limit to see more)" if total > len(rows) else ""
        table = terminal.goals_table(rows, clock.now(), colour=self._colour(options))
        self._emit([*table, f"{len(rows)} goal(s){more}"])

    def handle_show(self, goal_id: str, limit: int, every: bool, **options: Any) -> None:
        pk, state = self._load_goal(goal_id)
        self._emit(self._show_lines(pk, state, None if every else limit, self._colour(options)))

    @staticmethod
    def _show_lines(pk: str, state: GoalState, limit: int | None,
                    colour: bool) -> Iterator[str]:
        lines = terminal.state_lines(state, clock.now(), colour=colour)
        if state.status == DONE:  # what showed each done criterion holds, before "updated"
            completion = (Event.objects.filter(goal_id=pk, kind="goal.completed")
                          .order_by("-seq").values_list("data", flat=True).first())
            lines[-1:-1] = terminal.evidence_lines(completion or {})
        yield from lines
        events = Event.objects.filter(goal_id=pk).values_list(
            "seq", "recorded_at", "kind", "actor", "data")
        if limit is None:
            yield f"\ntimeline: all {state.version} event(s)"
            # Streamed: a goal of 100k events never sits in memory at once.
            rows: Iterable[tuple] = events.order_by("seq").iterator(chunk_size=2000)
        else:
            shown = min(limit, state.version)
            before = state.version - shown
            yield (f"\ntimeline: last {shown} of {state.version} event(s)"
                   + (f"; --all for the {before} before" if before else ""))
            # The newest N through the (goal, seq) index, printed oldest first.
            rows = reversed(list(events.order_by("-seq")[:limit]))
        for seq, recorded_at, kind, actor, data in rows:
            yield terminal.event_line(seq, recorded_at, kind, actor, data, colour=colour)

    # ------------------------------------------------------------------ demo

    def handle_demo(self, again: bool, **_: Any) -> None:
        found = demo.existing()
        if found and not again:
            self._emit([
                f"{len(found)} demo goal(s) already exist under {demo.ROOT}/ "
                "(`ledger demo --again` adds another set):",
                *(f"  {terminal.short_id(g.pk)}  {g.goal_key}: "
                  f"{g.status}{'/' + g.reason if g.reason else ''}" for g in found),
            ])
            return
        ensure_user(demo.AGENT, AGENT)
        made = demo.create()
        self._emit([
            f"made {len(made)} demo goal(s) for agent {demo.AGENT}:",
            *(f"  {terminal.short_id(g.goal_id)}  {g.goal_key:24} "
              f"{g.status + ('/' + g.reason if g.reason else ''):30} {g.story}" for g in made),
            "see them with `ledger goals` and `ledger show ID`, or in the admin at "
            f"{siteurl.admin_address()}",
        ])

    # ------------------------------------------------------------------ bootstrap

    def handle_bootstrap(self, **_: Any) -> None:
        url = f"{siteurl.base_url()}{reverse('admin:index')}"
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

    def _emit(self, lines: Iterable[str]) -> None:
        """Write ``lines``; a reader that went away (`ledger show ID --all | head`)
        ends the output quietly instead of with a BrokenPipeError traceback."""
        try:
            for line in lines:
                self.stdout.write(line)
            self.stdout.flush()
        except BrokenPipeError:
            if self.stdout._out is sys.stdout:
                # Python would hit the closed pipe again flushing stdout at exit.
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

    def _colour(self, options: dict[str, Any]) -> bool:
        """Colour only on a terminal (never in a pipe, a log or a test's
        StringIO), unless --force-color; --no-color and NO_COLOR turn it off."""
        if options.get("force_color"):
            return True
        if options.get("no_color") or os.environ.get("NO_COLOR"):
            return False
        return self.stdout.isatty()

    @staticmethod
    def _load_goal(value: str) -> tuple[str, GoalState]:
        """The goal a full id or a unique prefix of its hex digits (what the
        goals table prints) names, with its projected state."""
        pk = Command._goal_pk(value)
        row = Goal.objects.filter(pk=pk).values_list("state", flat=True).first()
        if row is None:
            raise CommandError(f"no such goal: {value}")
        return pk, GoalState.from_dict(row)

    @staticmethod
    def _goal_pk(value: str) -> str:
        try:
            return goalids.resolve(value)
        except (goalids.NotAGoalId, goalids.NoSuchGoal, goalids.AmbiguousGoal) as error:
            raise CommandError(str(error)) from None

    def _ids(self, selected: list[str]) -> list[str]:
        wanted = self._valid(selected)
        ids = projection.goal_ids(wanted)
        if wanted and len(ids) != len(set(wanted)):
            missing = sorted(set(wanted) - set(ids))
            raise CommandError(f"no such goal: {', '.join(missing)}")
        return ids

    @staticmethod
    def _valid(selected: list[str]) -> list[str]:
        """Full ids for what was typed: full ids or unique short prefixes."""
        return [Command._goal_pk(value) for value in selected]
