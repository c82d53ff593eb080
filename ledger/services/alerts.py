"""Who needs a human, and whether the scheduler still runs: one list for
GET /alerts, ``ledger alerts``, ``ledger doctor`` and the admin's dashboard.

A goal is listed when ``ledger.domain.liveness.alert`` names a reason: one the
state records (blocked, pending cleanup, HOST_SILENT, JOB_SILENT, failed in a
way a human must fix; the indexed ``attention`` column), or OVERDUE — its
deadline passed more than two sweeps ago and nothing recorded why (the
indexed ``deadline_at`` column). The second case is what keeps the promise
when the sweeper itself is down: a goal is never stuck past its deadline
without being listed.

Lists are truthful (docs/design.md, "Wakes and claims"): no surface caps this list silently.
GET /alerts pages it with a cursor and a total, ``ledger alerts`` prints the
total and says how many rows it did not show, and every total is an SQL COUNT
over the same query as the rows (``needing_a_human``).
"""

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Q, QuerySet

from ledger.domain import GoalState, liveness
from ledger.domain.events import iso
from ledger.domain.leases import RECONNECT_GRACE
from ledger.domain.parts import iso_text
from ledger.domain.state import ACTIVE_STATUSES
from ledger.domain.vocabulary import CLOCK_SKEW
from ledger.eventstore import clock
from ledger.models import Goal, SchedulerBeat

# Every list of alerts walks the goals oldest first, by a key that never
# changes: created_at (then id, for goals created in the same microsecond).
# ``-updated_at`` moved a goal to the front each time it changed, so a cursor
# walking the list skipped or repeated goals, and a cap cut off exactly the
# goals a human had waited longest for.
ORDER = ("created_at", "id")
# A goal's attention is set: ``attention > ''``, the condition of the partial
# index ledger_goal_attention_set. Not ``~Q(attention="")``: SQLite cannot
# seek ``!=``, so an OR with it scanned every goal (the /alerts page and its
# count were proportional to the number of goals); each half of the OR below
# is now an index search (SQLite's MULTI-INDEX OR, PostgreSQL's BitmapOr).
# attention is never NULL and '' sorts first, so the two mean the same.
ATTENTION_SET = Q(attention__gt="")
# The sweeper beats every WAKELEDGER_SWEEP_MINUTES; three missed beats (at
# least three minutes) mean no scheduler runs it.
SWEEPER = "sweeper"


def needing_a_human(goals: QuerySet[Goal], now: datetime) -> QuerySet[Goal]:
    """``liveness.alert`` as a query (the stored attention, or
    ``liveness.overdue``), oldest goal first: the rows every list shows and the
    query every total counts."""
    overdue = _overdue(now) & Q(status__in=ACTIVE_STATUSES)
    return goals.filter(ATTENTION_SET | overdue).order_by(*ORDER)


def _overdue(now: datetime) -> Q:
    """``liveness.alert``'s OVERDUE as a condition on indexed columns: the
    deadline passed, or the last event lies beyond the clock by more than the
    skew bound (stamped while the clock ran ahead: its deadline cannot be
    trusted until a command corrects it)."""
    return Q(deadline_at__lt=liveness.overdue_cutoff(now)) | Q(updated_at__gt=now + CLOCK_SKEW)


def count(goals: QuerySet[Goal], now: datetime | None = None) -> int:
    """How many goals need a human: an SQL COUNT over ``needing_a_human``."""
    return needing_a_human(goals, now or clock.now()).count()


def counts_by_reason(goals: QuerySet[Goal], now: datetime) -> dict[str, int]:
    """The same total, per reason: ``needing_a_human`` split on its two
    disjoint halves, so each is counted on its own index (SQLite scans every
    goal for the OR; /metrics and the dashboard ask this on every look): a
    GROUP BY over the partial attention index, and the goals whose attention
    is empty listed for being OVERDUE, on the deadline index."""
    grouped = (goals.filter(ATTENTION_SET).order_by().values("attention")
               .annotate(n=Count("*")))
    found = {row["attention"]: row["n"] for row in grouped}
    overdue = goals.filter(_overdue(now), attention="", status__in=ACTIVE_STATUSES).count()
    if overdue:
        found[liveness.OVERDUE_REASON] = overdue
    return found


def of_reason(goals: QuerySet[Goal], reason: str, now: datetime) -> QuerySet[Goal]:
    """The goals listed for ``reason`` (one of ``counts_by_reason``'s keys)."""
    listed = needing_a_human(goals, now)
    if reason == liveness.OVERDUE_REASON:
        return listed.filter(attention="")
    return listed.filter(attention=reason)


def alerts(goals: QuerySet[Goal], now: datetime | None = None) -> list[dict[str, Any]]:
    """Every goal that needs a human, oldest first. Lists that may be long
    page ``needing_a_human`` themselves and shape each goal with ``row``."""
    now = now or clock.now()
    return [row(goal, now) for goal in needing_a_human(goals, now).iterator(chunk_size=500)]


def row(goal: Goal, now: datetime) -> dict[str, Any]:
    """One goal of ``needing_a_human`` as an alert. Every goal the query
    matched is shown, so a page and its count always agree: the reason is
    ``liveness.alert`` of the state read in the same row, and should that read
    none (the row's columns disagree with its state, which ``ledger replay
    --check`` reports), the reason the columns matched."""
    state = GoalState.from_dict(goal.state)
    reason = liveness.alert(state, now) or matched_reason(goal)
    expected = liveness.expectation(state)
    return {
        "id": str(goal.pk), "goal_key": goal.goal_key, "workspace": goal.workspace,
        "agent": goal.agent, "status": goal.status, "reason": reason,
        "why": liveness.why(reason), "since": _since(state, reason, expected, now),
        "expected": expected.as_dict(),
    }


def matched_reason(goal: Goal) -> str:
    """Why ``needing_a_human`` matched the row: its attention column, or its
    passed deadline (OVERDUE)."""
    return goal.attention or liveness.OVERDUE_REASON


def _since(state: GoalState, reason: str, expected: liveness.Expectation,
           now: datetime) -> str:
    """Since when the goal needs a human: the missed host deadline, the passed
    deadline of an OVERDUE goal, or its last event (it blocked, it failed)."""
    if reason == liveness.HOST_SILENT and state.liveness_alert is not None:
        return iso(state.liveness_alert.at)
    if reason == liveness.OVERDUE_REASON and expected.deadline is not None:
        return iso(min(expected.deadline, now))  # a goal stamped ahead: not in the future
    return iso_text(state.updated_at)


def beat(name: str = SWEEPER) -> None:
    """The scheduler's heartbeat: written by the sweeper when a pass has
    completed (a pass that crashed part way writes none, so it shows)."""
    # One UPDATE a minute; the row is created once.
    now = clock.now()
    if not SchedulerBeat.objects.filter(name=name).update(at=now):
        SchedulerBeat.objects.get_or_create(name=name, defaults={"at": now})


# The last silence of the sweeper: from its last beat before it to the first
# pass after it (rows of their own, so every pass in the grace after it knows).
GAP_FROM, GAP_UNTIL = "sweeper.gap_from", "sweeper.gap_until"


def unheard_window(now: datetime) -> tuple[datetime, datetime] | None:
    """Called by the sweeper as a pass begins, and by a wake as it fires: the
    window in which no sweep completed, when it ended less than the reconnect
    grace ago (else None). No sweep means the scheduler or the database was
    down — and with the database, every client's heartbeat was refused too.
    One missed pass is enough (passes come 60-90 s apart: django-q2 looks at
    its rows every 30 s); the health check's "silent" waits for three."""
    limit = timedelta(minutes=2 * settings.WAKELEDGER_SWEEP_MINUTES)
    beats = dict(SchedulerBeat.objects.filter(name__in=(SWEEPER, GAP_FROM, GAP_UNTIL))
                 .values_list("name", "at"))
    last = beats.get(SWEEPER)
    # Whether the database or only the scheduler was down cannot be told
    # afterwards (clients retrying after the outage write before the first
    # sweep back): either way nothing could act on a stale lease meanwhile, so
    # five more minutes for a holder that may have been refused cost little.
    # The silence ends with the first pass that runs after it, a sweep or a
    # wake's fire (either reached the database): noticed once, its end stays,
    # so a sweeper that stays silent while wakes fire (or crashes before its
    # beat) gives no holder more than the one grace.
    if last is not None and now - last > limit and beats.get(GAP_FROM) != last:
        for name, moment in ((GAP_FROM, last), (GAP_UNTIL, now)):
            SchedulerBeat.objects.update_or_create(name=name, defaults={"at": moment})
        beats.update({GAP_FROM: last, GAP_UNTIL: now})
    start, end = beats.get(GAP_FROM), beats.get(GAP_UNTIL)
    if start is None or end is None or not end <= now <= end + RECONNECT_GRACE:
        return None
    return start, end


def scheduler_health(now: datetime | None = None, *,
                     unchanged_for: Callable[[datetime], timedelta] | None = None
                     ) -> dict[str, Any]:
    """Whether the scheduler still runs: ok, silent (no sweep for
    WAKELEDGER_SCHEDULER_SILENT_SECONDS, three intervals by default, or a last
    sweep dated in the future) or never_ran (no qcluster has swept this
    database yet).

    A last sweep dated beyond the clock's skew bound was written while the
    clock ran ahead: the clock was set back since, and "now - last" reads
    negative, which once read as fresh — health said ok while nothing swept
    for as long as the clock had been ahead (django-q2 had moved the
    sweeper's row as far ahead). It reads silent: no sweep is known to have
    run since, and the silence alarm and its repair of the rows
    (``notifications.scheduler_standing``) follow.

    ``unchanged_for``: a long-running caller's own evidence (the watch's), how
    long it has seen this same last sweep by its monotonic clock, which no
    step of the wall clock moves: past the limit it is silent whatever the
    wall clock says (a beat a few minutes ahead, within the skew bound)."""
    now = now or clock.now()
    last = SchedulerBeat.objects.filter(name=SWEEPER).values_list("at", flat=True).first()
    limit = timedelta(seconds=settings.WAKELEDGER_SCHEDULER_SILENT_SECONDS)
    ahead = last is not None and last > now + CLOCK_SKEW
    stale = last is not None and unchanged_for is not None and unchanged_for(last) > limit
    status = "never_ran" if last is None else (
        "ok" if not ahead and not stale and now - last <= limit else "silent")
    why = {"ok": "", "never_ran": "no scheduler (manage.py qcluster) has run the lease "
                                  "sweeper on this database yet",
           "silent": f"the lease sweeper has not completed a pass for over {limit}: "
                     "is the scheduler (manage.py qcluster) running? (a running "
                     "one logs why its sweep fails; `ledger doctor` checks the "
                     "sweeper's row)"}[status]
    if stale and not ahead and now - last <= limit:
        why = (f"the lease sweeper's last pass ({iso(last)}) has not changed for over "
               f"{limit} by this process's own monotonic clock, though this clock reads "
               "it as recent: is the scheduler (manage.py qcluster) running?")
    if ahead:
        why = (f"the last lease sweep is dated {iso(last)}, ahead of this clock "
               f"({iso(now)}): the clock ran ahead and was set back, and no sweep is known "
               "to have run since (django-q2 moved the sweeper's row as far ahead; "
               "`ledger doctor --fix` or `ledger notify` restores it)")
    return {"status": status, "last_sweep_at": iso(last) if last else None, "why": why}
