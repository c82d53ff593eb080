"""`ledger` actions: goals, show, replay: what an operator reads.

The arguments (``add``) and the handlers (``Reading``, mixed into the command
in ledger/management/commands/ledger.py). Thin: parse, call, print."""

from collections.abc import Iterable, Iterator
from typing import Any

from django.core.management.base import CommandError

from ledger.domain import GoalState, Unreadable
from ledger.domain.vocabulary import DONE, REASONS, STATUSES
from ledger.eventstore import clock, projection
from ledger.models import Event, Goal
from ledger.operators import summaries, terminal
from ledger.operators.commands.base import Shell, positive
from ledger.operators.progress import Progress

SHOW_LIMIT = 50  # events `ledger show` prints unless told otherwise
GOALS_LIMIT = 50


def add(actions: Any) -> None:
    """goals, show, replay: what an operator reads."""
    goals = actions.add_parser("goals", help="A table of goals, most recently updated first.")
    goals.add_argument("--status", nargs="+", action="extend", choices=STATUSES,
                       metavar="STATUS", help=f"any of: {', '.join(STATUSES)}")
    goals.add_argument("--reason", type=str.upper, choices=REASONS, metavar="REASON",
                       help="e.g. BLOCKED_APPROVAL, INTERRUPTED_UNKNOWN")
    goals.add_argument("--agent")
    goals.add_argument("--limit", type=positive, default=GOALS_LIMIT,
                       help=f"at most this many rows (default {GOALS_LIMIT})")

    show = actions.add_parser(
        "show", help="One goal: its projected state, then its timeline of events.")
    show.add_argument("goal_id", metavar="GOAL_ID",
                      help="a goal id, or the first 4+ hex digits of one (as `goals` shows)")
    how_many = show.add_mutually_exclusive_group()
    how_many.add_argument("--limit", type=positive, default=SHOW_LIMIT,
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


class Reading(Shell):
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
            lines[-1:-1] = summaries.evidence_lines(completion or {})
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
            yield summaries.event_line(seq, recorded_at, kind, actor, data, colour=colour)

    def handle_replay(self, goal_ids: list[str], check: bool, fix: bool, **_: Any) -> None:
        ids = self._ids(goal_ids)
        bar = Progress(len(ids), "replay", self.stderr._out)
        try:
            reports = list(projection.replay(ids, fix=fix, progress=bar.advance))
        except Unreadable as error:
            # A database a development build wrote before the first release
            # (docs/deploy.md, "Upgrading"), or a row damaged by hand.
            raise CommandError(f"replay stopped: {error} (docs/deploy.md, \"Upgrading\")",
                               returncode=1) from None
        finally:
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
