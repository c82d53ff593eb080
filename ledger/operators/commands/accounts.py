"""`ledger` actions: agent, user, prune: who may call the API, and its housekeeping.

The arguments (``add``) and the handlers (``Accounts``, mixed into the command
in ledger/management/commands/ledger.py). Thin: parse, call, print."""

import getpass
import secrets
import sys
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.db import transaction

from ledger.access.accounts import (
    AGENT,
    AUDITOR,
    OPERATOR,
    ROLES,
    issue_token,
    prune_idempotency_records,
    prune_mcp_leases,
    role_of,
)
from ledger.access.models import ApiToken
from ledger.eventstore import clock
from ledger.operators.commands.base import Shell
from ledger.project import siteurl


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


def add(actions: Any) -> None:
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
                      "(WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS), and /mcp lease rows "
                      "whose lease ended longer ago.")


class Accounts(Shell):
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

    def handle_prune(self, **_: Any) -> None:
        hours = settings.WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS
        deleted = prune_idempotency_records()
        self.stdout.write(f"deleted {deleted} idempotency record(s) older than {hours} h")
        leases = prune_mcp_leases()
        self.stdout.write(f"deleted {leases} MCP lease row(s) whose lease ended over {hours} h ago")
