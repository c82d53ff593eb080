"""What django-q2 runs: the internal watchdog's wake and the lease sweeper.

Thin: each calls the same claim and store commands as the API.
"""

import logging

from django.db import DatabaseError

from ledger import clock, store
from ledger.domain import DomainError
from ledger.domain.wakes import ExpireLease, RecordDispatch
from ledger.models import Goal
from scheduling import claims, dispatch

logger = logging.getLogger(__name__)


def fire_watchdog(goal_id: str, intended_date: str | None = None) -> str:
    """A watchdog occurrence fired. Its id is the schedule's intended run time,
    so the same occurrence fired twice (two clusters, a retry) is one claim."""
    occurrence = f"internal:{goal_id}@{intended_date or clock.now().isoformat()}"
    try:
        result = claims.claim(goal_id, source="internal", occurrence_id=occurrence,
                              actor="scheduler")
    except store.GoalNotFound:
        logger.warning("watchdog fired for unknown goal %s", goal_id)
        return "unknown_goal"
    logger.info("wake %s for goal %s: %s", occurrence, goal_id, result.outcome)
    if result.outcome == "recurring_acquired":
        _dispatch(goal_id, occurrence, result)
    return result.outcome


def _dispatch(goal_id: str, occurrence: str, result: claims.Claim) -> None:
    """After the claim committed (the lease is granted and recorded first, so a
    crash here never hands out a continuation the ledger does not know)."""
    name = result.state.policy.get("dispatch", "none")
    if name == "none":
        return  # the agent or its host polls and claims
    outcome = dispatch.dispatch(
        name, goal_id=goal_id, occurrence_id=occurrence,
        session_key=result.state.session_key, packet=result.packet or {},
        report=result.report, lease=result.lease or {})
    try:
        store.execute(goal_id, RecordDispatch(occurrence, name, outcome.ok, outcome.detail),
                      actor="scheduler")
    except DomainError as error:  # the goal ended meanwhile: nothing to record on it
        logger.info("dispatch of %s not recorded: %s", occurrence, error.detail)


def sweep_leases() -> int:
    """Record lease.expired for every lease past its expiry and stale grace.
    Candidates come from the indexed lease_expires_at column; the domain
    decides (grace, running jobs)."""
    now = clock.now()
    expired = 0
    candidates = Goal.objects.filter(lease_expires_at__lt=now).values_list("id", flat=True)
    for goal_id in candidates.iterator():
        try:
            outcome = store.execute(goal_id, ExpireLease(), actor="scheduler")
        except (DomainError, DatabaseError) as error:
            logger.warning("sweeper could not expire goal %s: %s", goal_id, error)
            continue
        expired += bool(outcome.events)
    if expired:
        logger.info("lease sweeper expired %d lease(s)", expired)
    return expired
