"""What every `ledger` action shares: writing lines (a closed pipe ends them
quietly), colour, and goals named by a full id or a unique prefix."""

import argparse
import os
import sys
from collections.abc import Iterable
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ledger.domain import GoalState
from ledger.eventstore import projection
from ledger.models import Goal
from ledger.operators import goalids


def positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return number


class Exit(CommandError):
    """An exit code that is an answer, not a failure (`ledger alerts`: 1 when
    goals need a human). The shell sees the code and the lines already printed,
    never Django's ``CommandError: ...`` line, which reads like a crash."""


class Shell(BaseCommand):
    """The helpers the action mixins use (they are one ``BaseCommand`` at run time)."""

    def execute(self, *args: Any, **options: Any) -> Any:
        try:
            return super().execute(*args, **options)
        except Exit as done:
            if getattr(self, "_called_from_command_line", False):
                # A shell: the code alone (Django would print the error's line).
                sys.exit(done.returncode)
            raise  # call_command: the caller reads the code from the exception

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
        pk = Shell._goal_pk(value)
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
        return [Shell._goal_pk(value) for value in selected]
