"""`ledger` actions: demo, bootstrap: a first admin, a populated admin.

The arguments (``add``) and the handlers (``Setup``, mixed into the command
in ledger/management/commands/ledger.py). Thin: parse, call, print."""

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.urls import reverse

from ledger.access.accounts import (
    AGENT,
)
from ledger.operators import demo, terminal
from ledger.operators.commands.accounts import ensure_user
from ledger.operators.commands.base import Shell
from ledger.project import siteurl


def add(actions: Any) -> None:
    """demo, bootstrap."""
    demo_parser = actions.add_parser(
        "demo", help=f"Create a few realistic demo goals (agent {demo.AGENT}, "
                     f"workspaces under {demo.ROOT}/); does nothing if they exist.")
    demo_parser.add_argument("--again", action="store_true",
                             help="add another set even if demo goals exist")

    actions.add_parser(
        "bootstrap",
        help="Create the first admin user (random password, printed once) and print the URL.")


class Setup(Shell):
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
