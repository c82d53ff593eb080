"""What django-q2 runs: a wake firing, and the minutely liveness sweep.

Thin: a wake is ``ledger.services.wakes.fire``, the use case the API's claims
share; the sweep is ``ledger.services.sweeps.check_goal`` on each goal past
its deadline, the domain's liveness check.
"""

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from itertools import chain
from typing import Any

from django.db import DatabaseError

from ledger.domain import DomainError, GoalState
from ledger.domain.vocabulary import ACTIVE_STATUSES, CLOCK_SKEW
from ledger.eventstore import clock, failpoints
from ledger.models import Goal
from ledger.operators import doctor
from ledger.services import alerts, sweeps, wakes
from ledger.services.caller import GoalNotFound
from scheduling import notify, outbox

logger = logging.getLogger(__name__)


def fire_watchdog(goal_id: str, intended_date: str | None = None,
                  kind: str = "recurring") -> str:
    """A wake fired (django-q2 passes the schedule's intended run time)."""
    try:
        result = wakes.fire(goal_id, intended_date, kind)
    except GoalNotFound:
        logger.warning("a wake fired for unknown goal %s", goal_id)
        return "unknown_goal"
    logger.info("wake %s for goal %s: %s", result.occurrence_id, goal_id, result.outcome)
    if result.resumes:
        # The claim committed first (lease granted, charge and outbox row
        # recorded), so a crash from here on never hands out a continuation
        # the ledger does not know of.
        if failpoints.ARMED:
            failpoints.reached("claim.after_commit")
        if result.dispatched:
            # With no dispatcher the claim wrote no outbox row (record_dispatches
            # asks the same question of the same state), so none of this
            # wake's is pending: the query was a seventh of a pulled claim's
            # cost. Rows an earlier crash left pending are the sweeper's.
            # The claim's state goes along: the sender reads the goal no more.
            outbox.send_pending(result.state.goal_id, result.state)
    return result.outcome


def sweep_leases() -> int:
    """The minutely sweep (docs/design.md, "Wakes and claims"): act on every goal whose
    deadline passed — a lease past its stale point expires (and an internal
    goal gets its timeout_recovery wake), a ready goal nobody pulled blocks, a
    silent host or job is alerted, a wake whose row is missing, exhausted or
    late is repaired — then finish the outbox (rows a crashed sender left).
    Candidates come from the indexed deadline_at column; the domain decides.
    Returns how many goals it changed."""
    now = clock.now()
    # First the outbox rows no sender took before their lease expired: they
    # started nothing, so their goals must not read as interrupted below.
    outbox.release_lapsed()
    unheard = alerts.unheard_window(now)
    changed = 0
    candidates = Goal.objects.filter(deadline_at__lte=now, status__in=ACTIVE_STATUSES) \
        .values_list("id", "state")
    for goal_id, raw in chain(candidates.iterator(chunk_size=200), _stamped_ahead(now)):
        try:
            outcome = sweeps.check_goal(str(goal_id), GoalState.from_dict(raw),
                                        unheard=unheard)
        except (DomainError, DatabaseError) as error:
            logger.warning("sweeper could not check goal %s: %s", goal_id, error)
            continue
        changed += bool(outcome.events)
        failpoints.reached("sweeper.after_expire")
    if changed:
        logger.info("liveness sweep changed %d goal(s)", changed)
    _ensure_repair(now)
    outbox.resolve_stuck()
    outbox.send_pending()
    # The scheduler's heartbeat, once the pass completed: a sweep that
    # crashes part way must not look healthy.
    alerts.beat()
    # After the beat, so a sweep that ends a silence tells that it is back.
    notify.tick()
    return changed


def _stamped_ahead(now: datetime) -> Iterator[tuple[Any, Any]]:
    """Active goals whose last event lies in the future beyond the skew bound:
    stamped while the clock ran ahead, their deadlines are hours away, so the
    deadline query above misses them; their check records the correction
    (ledger.domain.clocksteps). Nearly always none: a range on the
    updated_at index alone (a status filter could steer the planner to scan
    every active goal), the status checked here."""
    ahead = Goal.objects.filter(updated_at__gt=now + CLOCK_SKEW) \
        .values_list("id", "state", "status")
    for goal_id, raw, status in ahead.iterator(chunk_size=200):
        if status in ACTIVE_STATUSES:
            yield goal_id, raw


# The hourly repair restores the sweeper's row; the sweeper restores the
# repair's, but looks at most every ten minutes (a query a minute for a row
# that is nearly always there was a tenth of an idle sweep).
_REPAIR_LOOK_EVERY = timedelta(minutes=10)
_repair_looked_at: datetime | None = None


def _ensure_repair(now: datetime) -> None:
    global _repair_looked_at
    if _repair_looked_at is not None and timedelta(0) <= now - _repair_looked_at \
            < _REPAIR_LOOK_EVERY:
        return
    doctor.ensure_repair()
    _repair_looked_at = now
