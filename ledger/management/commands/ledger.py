"""``manage.py ledger <action>``: the operator's commands.

Each action is a thin shell: it parses arguments, calls the application layer or the
projection module, and prints. No rule lives here. The actions live in
ledger/operators/commands/, one module per group (reading, auditing, accounts,
acts, setup); this is Django's entry point that puts them together.
"""

from argparse import ArgumentParser
from typing import Any

from ledger.operators.commands import accounts, acts, auditing, notifying, reading, setup


class Command(reading.Reading, auditing.Auditing, accounts.Accounts, acts.Acts,
              notifying.Notifying, setup.Setup):
    help = ("Wake Ledger operator commands: goals, show, replay, verify, seal, head, key, "
            "export, agent, user, prune, stop, recover, approve, alerts, notify, demo, bootstrap. "
            "GOAL_ID is a full id or its first 4+ hex digits (the 8 `goals` prints).")

    def add_arguments(self, parser: ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        for group in (reading, auditing, accounts, acts, notifying, setup):
            group.add(actions)
        # The description names every action from the parser itself, so an
        # action added above can never be missing from it (wake and doctor were).
        parser.description = (f"Wake Ledger operator commands: {', '.join(actions.choices)}. "
                              "GOAL_ID is a full id or its first 4+ hex digits (the 8 "
                              "`goals` prints).")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        getattr(self, f"handle_{action}")(**options)
