"""``manage.py ledger <action>``: the operator's commands.

Each action is a thin shell: it parses arguments, calls the application layer or the
projection module, and prints. No rule lives here. The actions live in
ledger/operators/commands/, one module per group (reading, auditing, accounts,
acts, setup); this is Django's entry point that puts them together.
"""

from argparse import ArgumentParser
from functools import cache
from typing import Any

from ledger.operators.commands import accounts, acts, auditing, notifying, reading, setup

GROUPS = (reading, auditing, accounts, acts, notifying, setup)


def add_actions(parser: ArgumentParser) -> Any:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for group in GROUPS:
        group.add(actions)
    return actions


@cache
def summary() -> str:
    """The command's help, naming every action from the parser itself, so an
    action added to a group can never be missing from it (wake and doctor were)."""
    names = ", ".join(add_actions(ArgumentParser(add_help=False)).choices)
    return (f"Wake Ledger operator commands: {names}. GOAL_ID is a full id or its first "
            "4+ hex digits (the 8 `goals` prints).")


class Command(reading.Reading, auditing.Auditing, accounts.Accounts, acts.Acts,
              notifying.Notifying, setup.Setup):
    @property
    def help(self) -> str:  # type: ignore[override]  # Django reads it as an attribute
        return summary()

    def add_arguments(self, parser: ArgumentParser) -> None:
        add_actions(parser)
        parser.description = summary()

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        getattr(self, f"handle_{action}")(**options)
