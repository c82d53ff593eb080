"""What django-q2 runs: a wake firing, and the minutely sweeper.

Thin: each calls the same store commands as the API.
"""

import logging

from django.db import DatabaseError

from ledger import clock, continuations, failpoints, store
from ledger.domain import DomainError
from ledger.domain.wakes import ExpireLease
from ledger.models import Goal
from scheduling import dispatch, outbox

logger = logging.getLogger(__name__)


def fire_watchdog(goal_id: str, intended_date: str | None = None,
                  kind: str = "recurring") -> str:
    """A wake fired: the recurring watchdog's slot, or a one-off wake (``kind``).
    Its id is the schedule's intended run time, so the same occurrence fired
    twice (two clusters, a retry) is one claim."""
    intended = intended_date or clock.now().isoformat()
    occurrence = f"internal:{goal_id}@{intended}" if kind == "recurring" else \
        f"internal:{goal_id}@{kind}:{intended}"
    try:
        state = store.load(goal_id)
        # Push: the dispatcher starts the continuation and carries its lease.
        # A dispatcher that only notifies (none carries no lease) leaves the
        # wake to be pulled, like "none".
        name = state.setting("dispatch")
        push = name != "none" and dispatch.hands_over_lease(name)
        result = continuations.claim(goal_id, source="internal", occurrence_id=occurrence,
                                     actor="scheduler", kind=kind, intended_at=intended,
                                     push=push)
    except store.GoalNotFound:
        logger.warning("a wake fired for unknown goal %s", goal_id)
        return "unknown_goal"
    logger.info("wake %s for goal %s: %s", occurrence, goal_id, result.outcome)
    if result.outcome in ("recurring_acquired", "ready_for_pull"):
        # The claim committed first (lease granted, charge and outbox row
        # recorded), so a crash from here on never hands out a continuation
        # the ledger does not know of.
        failpoints.reached("claim.after_commit")
        if outbox.dispatches(result.state):
            # With no dispatcher after the claim, the claim wrote no outbox row
            # (outbox.record asks the same question of the same state), so none
            # of this wake's is pending: the query was a seventh of a pulled
            # claim's cost. Rows an earlier crash left pending are the
            # sweeper's, every minute, as they always were.
            outbox.send_pending(store.canonical_id(goal_id))
    return result.outcome


def sweep_leases() -> int:
    """Record lease.expired for every lease past its expiry and stale grace,
    and finish the outbox: rows a crashed sender left pending or sending.
    Candidates come from the indexed lease_expires_at column; the domain
    decides (grace, running jobs, rule 6)."""
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
        failpoints.reached("sweeper.after_expire")
    if expired:
        logger.info("lease sweeper expired %d lease(s)", expired)
    outbox.resolve_stuck()
    outbox.send_pending()
    return expired
