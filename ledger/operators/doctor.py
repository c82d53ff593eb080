"""``ledger doctor``: is the machinery that keeps goals moving intact? And
``ledger doctor --fix`` (also run by the scheduler every hour): repair it.

Liveness is proven by evidence (docs/design.md, "Wakes and claims", ``ledger.domain.liveness``):
every active goal has a next expected evidence and a deadline. The doctor
reports what would let a deadline pass unseen or unrepaired:

- ``scheduler_silent`` / ``scheduler_never_ran``: no lease sweep for minutes
  (the heartbeat row the sweeper writes), so no deadline is acted on;
- ``sweeper_missing`` / ``repair_missing``: the sweeper's (or the hourly
  repair's) own django-q2 row is gone or exhausted;
- ``sweeper_misscheduled`` / ``repair_misscheduled``: that row's next run is
  not where a firing row's is (years ahead, or long past while the scheduler
  runs: ``ledger.domain.housekeeping``);
- ``overdue``: a goal past its deadline with nothing recorded (also in /alerts);
- ``schedule_missing`` / ``schedule_exhausted`` / ``schedule_late``: a wake the
  projection says exists whose django-q2 row will not fire it on time — rows
  are checked by content (task, goal, repeats, next run), not only by name;
- ``schedule_orphaned``: a row named after a goal that does not expect it;
- ``clock_ahead``: a goal whose last event lies in the future beyond the
  skew bound (stamped while the server's clock ran ahead): ``--fix`` records
  ``clock.stepped_back`` and its deadlines come back within the policy
  (``ledger.domain.clocksteps``);
- ``unlisted``: a goal whose state needs a human but whose indexed columns
  keep it out of the alerts query (``ledger replay --fix`` rewrites them);
- ``tallies_drift``: the goals-by-status tallies /metrics reports disagree
  with a COUNT of the goal table (a goal row written outside the store);
  ``--fix`` recounts them (``ledger.eventstore.tallies.recount``).

Goals that need a human are the alerts' (``ledger alerts``), counted here too
with SQL; ``listing`` says what the doctor verified of every active goal.
Repairs are domain commands (``CheckLiveness``): each is an event on the goal's
history, and the rows follow the events in the same transaction. A pass over
every goal (``check``, ``fix``: the hourly repair, ``ledger doctor``) is kept
with what it did (``operators.passes``): the admin's dashboard shows the
newest instead of checking every goal's rows on each view.
"""

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DatabaseError, transaction
from django.db.models import QuerySet
from django_q.models import Schedule

from ledger.domain import DomainError, GoalState, clocksteps, iso_text, liveness
from ledger.domain.overdue import expected_schedules, row_problem
from ledger.domain.vocabulary import ACTIVE_STATUSES, SCHEDULE_PREFIXES, schedule_goal
from ledger.eventstore import clock, tallies
from ledger.log import sealer_state
from ledger.models import Goal
from ledger.operators import passes
from ledger.services import alerts, loghealth, sweeps
from ledger.services.caller import GoalNotFound, state_of
from ledger.services.goals import Caller
from ledger.services.schedules import (  # noqa: F401  (the rows the doctor checks)
    FIRE,
    REPAIR,
    REPAIR_NAME,
    SWEEP,
    SWEEPER_NAME,
    SystemRow,
    ensure_repair,
    ensure_sweeper,
    goal_arg,
    last_error,
    row_facts,
    system_row_problem,
    system_rows,
)

logger = logging.getLogger(__name__)

# A wake's row, by the domain's names (``watchdogs.SCHEDULE_PREFIXES``).
_GOAL_ROWS = "^(" + "|".join(SCHEDULE_PREFIXES) + ")"  # letters and dashes only


@dataclass(frozen=True)
class Finding:
    goal_id: str  # "" for the scheduler's own problems
    problem: str  # a stable code (the module doc)
    detail: str
    row: str = ""  # the django-q2 row's name, for a row problem


check_goal = sweeps.check_goal


# ---------------------------------------------------------------- findings


def system_findings(now: datetime) -> Iterator[Finding]:
    health = alerts.scheduler_health(now)
    if health["status"] != "ok":
        yield Finding("", f"scheduler_{health['status']}", health["why"])
    for spec in system_rows():
        problem, why = system_row_problem(spec, now, scheduler_runs=health["status"] == "ok")
        if problem:
            yield Finding("", f"{spec.code}_{problem}",
                          f"{why}: {spec.loss} (`ledger doctor --fix` restores it)",
                          row=spec.name)
    wrong = tallies.drift()
    if wrong:
        yield Finding("", "tallies_drift", "the goals /metrics reports disagree with a count "
                      f"of the goal table: {describe_drift(wrong)} (`ledger doctor --fix` "
                      "recounts them)")
    # The rolling comparison of sealed events with their leaves: a rewrite by
    # SQL raises the sealer's alarm here too, without waiting for a seal.
    loghealth.check_leaves()
    alarm = sealer_state.inconsistency_alarm()
    if alarm:  # no repair: a human decides what happened (docs/integrity.md)
        yield Finding("", "log_inconsistent", f"ALARM: the sealer signs no head: {alarm}")


def findings(goal_ids: list[str] | None = None) -> Iterator[Finding]:
    now = clock.now()
    if not goal_ids:
        yield from system_findings(now)
    goals = Goal.objects.filter(status__in=ACTIVE_STATUSES)
    if goal_ids:
        goals = goals.filter(pk__in=goal_ids)
    expected: set[str] = set()
    cutoff = liveness.overdue_cutoff(now)
    rows = goals.values_list("id", "state", "attention", "deadline_at")
    for goal_id, raw, attention, deadline in rows.iterator(chunk_size=500):
        state, gid = GoalState.from_dict(raw), str(goal_id)
        reason = liveness.alert(state, now)
        if reason == liveness.OVERDUE_REASON:
            yield Finding(gid, "overdue", liveness.expectation(state).detail)
        ahead = clocksteps.ahead_by(state, now)
        if ahead is not None:
            yield Finding(gid, "clock_ahead",
                          f"its last event ({iso_text(state.updated_at)}) is {ahead} ahead of this "
                          "clock: it was stamped while the clock ran ahead, so its deadlines "
                          "lie that far out (`ledger doctor --fix` brings them back)")
        # What lets the doctor say every such goal is listed: the alerts
        # query (``alerts.needing_a_human``) matches this row's columns.
        if reason and not (attention or (deadline is not None and deadline < cutoff)):
            yield Finding(gid, "unlisted",
                          f"needs a human ({reason}) but its projection's columns keep it out "
                          "of /alerts and `ledger alerts`: `ledger replay --fix`")
        names = expected_schedules(state)
        expected |= set(names)
        facts = {row.name: row for row in row_facts(gid, set(names))}
        for name, due in sorted(names.items()):
            problem = row_problem(due, facts[name], now)
            if problem:
                yield Finding(gid, f"schedule_{problem}",
                              f"the projection has a live wake {name} (due {due or '-'}) but "
                              f"its django-q2 row is {problem}", row=name)
    if goal_ids:
        return
    for name in sorted(_goal_rows() - expected):
        yield Finding(goal_of(name), "schedule_orphaned",
                      f"django-q2 row {name} fires for a goal whose projection has no such "
                      "live wake", row=name)


def describe_drift(wrong: dict[tuple[str, str], tuple[float, float]]) -> str:
    """``status/reason tallied N, counted M`` for each disagreement."""
    parts = []
    for (_name, label), (tallied, counted) in wrong.items():
        found = tallies.parse_labels(label)
        parts.append(f"{found['status']}/{found['reason'] or '-'} tallied {tallied:g}, "
                     f"counted {counted:g}")
    return "; ".join(parts)


@dataclass(frozen=True)
class Listing:
    """What the doctor counted of the goals (SQL, over every one of them)."""

    active: int  # active goals
    listed: int  # active goals the alerts query lists
    waiting: int  # every goal that needs a human (failed ones for a human too)


def listing(goals: QuerySet[Goal], now: datetime | None = None) -> Listing:
    now = now or clock.now()
    active = goals.filter(status__in=ACTIVE_STATUSES)
    return Listing(active=active.count(), listed=alerts.count(active, now),
                   waiting=alerts.count(goals, now))


def _goal_rows() -> set[str]:
    return set(Schedule.objects.filter(name__regex=_GOAL_ROWS).values_list("name", flat=True))


def goal_of(name: str) -> str:
    return schedule_goal(name)


# ---------------------------------------------------------------- repairs


def check(goal_ids: list[str] | None = None) -> list[Finding]:
    """``findings``, kept as a pass (``operators.passes``) when it went over
    every goal: the dashboard shows the newest pass."""
    started = clock.now()
    found = list(findings(goal_ids))
    if not goal_ids:
        _record("doctor", started, found, {})
    return found


def _record(source: str, started: datetime, found: list[Finding],
            outcomes: dict[str, list[str]], repairs: int = 0) -> None:
    """Keep the pass. Not a fact (the repairs are events, already committed):
    a failure to keep it is logged, and the page goes on saying how old its
    newest pass is."""
    prefix = "goal "  # each repair line names its goal first: keep only what was done
    what = {goal_id: "; ".join(line.split(": ", 1)[-1] if line.startswith(prefix) else line
                              for line in lines) or "nothing to repair yet (the domain decided)"
            for goal_id, lines in outcomes.items()}
    try:
        with transaction.atomic():  # a savepoint: PostgreSQL goes on after an error
            active = Goal.objects.filter(status__in=ACTIVE_STATUSES).count()
            passes.record(source, started, clock.now(), found, active=active,
                          outcomes=what, repairs=repairs)
    except DatabaseError as error:
        logger.warning("the doctor's pass was not kept: %s", type(error).__name__)


def fix(goal_ids: list[str] | None = None, *, actor: str = "scheduler") -> list[str]:
    """Repair what ``findings`` reports; returns a line per repair. Over every
    goal, what was found and done is kept as a pass (the dashboard's)."""
    done: list[str] = []
    started = clock.now()
    found = list(findings(goal_ids))
    system = {f.problem for f in found if not f.goal_id}
    if system & {"sweeper_missing", "sweeper_misscheduled"}:
        ensure_sweeper(force=True)
        done.append(f"restored django-q2 row {SWEEPER_NAME}")
    if system & {"repair_missing", "repair_misscheduled"}:
        ensure_repair(force=True)
        done.append(f"restored django-q2 row {REPAIR_NAME}")
    orphans: dict[str, list[str]] = {}
    goals: set[str] = set()
    for finding in found:
        if finding.problem == "schedule_orphaned":
            orphans.setdefault(finding.goal_id, []).append(finding.row)
        elif finding.goal_id:
            goals.add(finding.goal_id)
    # The sweeper's reconnect grace holds for the repair too: after an outage
    # the hourly repair may run before the first sweep back.
    unheard = alerts.unheard_window(clock.now())
    outcomes: dict[str, list[str]] = {}
    for goal_id in sorted(goals | set(orphans)):
        outcomes[goal_id] = _fix_goal(goal_id, tuple(orphans.get(goal_id, ())), actor, unheard)
        done += outcomes[goal_id]
    if "tallies_drift" in system:
        # Recounted under the tally table's lock (what drift() saw may have
        # moved since), and last: a caller's outer transaction would hold
        # that lock to its commit, and no goal's row lock is asked for after.
        wrong = tallies.recount()
        if wrong:
            done.append(f"recounted the goal tallies: {describe_drift(wrong)}")
    if not goal_ids:
        _record(actor, started, found, outcomes, repairs=len(done))
    return done


def _fix_goal(goal_id: str, orphans: tuple[str, ...], actor: str,
              unheard: tuple[datetime, datetime] | None = None) -> list[str]:
    try:
        state = state_of(Caller(actor), goal_id)
    except GoalNotFound:
        # No goal to record it on (deleted by hand): the rows just go.
        Schedule.objects.filter(name__in=orphans).delete()
        return [f"deleted {name}: its goal does not exist" for name in orphans]
    try:
        outcome = check_goal(goal_id, state, actor=actor, orphans=orphans, unheard=unheard)
    except (DomainError, DatabaseError) as error:
        logger.warning("could not repair goal %s: %s", goal_id, error)
        return [f"goal {goal_id}: not repaired ({error})"]
    return [f"goal {goal_id}: {event.kind} {_what(event.data)}" for event in outcome.events]


def _what(data: dict[str, Any]) -> str:
    return str(data.get("note") or data.get("reason") or data.get("repair") or "")


