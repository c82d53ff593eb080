"""Goals that need a human, newest first: shared by GET /alerts and `ledger alerts`."""

from typing import Any

from django.db.models import Q, QuerySet

from ledger.domain import GoalState
from ledger.domain.state import BLOCKED, FAILED
from ledger.domain.timing import FAILURES_FOR_A_HUMAN, PENDING_CLEANUP
from ledger.models import Goal

# The database side of ledger.domain.timing.needs_human (the same three cases).
NEEDS_A_HUMAN = Q(status=BLOCKED) | Q(status=FAILED, reason__in=sorted(
    FAILURES_FOR_A_HUMAN)) | Q(reason=PENDING_CLEANUP)

WHY = {
    "BLOCKED_APPROVAL": "waits for an approval decision",
    "RATE_LIMIT_STOPPED": "rate limited with the continuation budget spent",
    "CONTINUATION_STOPPED": "the continuation budget is spent",
    "INTERRUPTED_UNKNOWN": "a continuation went silent; it may have done something",
    "WAKE_RETRIES_EXHAUSTED": "woke repeatedly without progress",
    "SESSION_CHANGED": "the agent's session changed",
    "SESSION_ACTIVITY": "a later turn finished by hand",
    "UNCLASSIFIED": "failed for an unknown reason",
    "AUTH_FAILED": "authentication failed",
    "OWNER_VERIFICATION": "the account owner must verify",
    "PENDING_NATIVE_CLEANUP": "finished; its host watchdog must be deleted",
    "AGENT_BLOCKED": "the agent said it cannot go on",
}


def alerts(goals: QuerySet[Goal]) -> list[dict[str, Any]]:
    rows = goals.filter(NEEDS_A_HUMAN).order_by("-updated_at")[:500]
    result = []
    for goal in rows:
        state = GoalState.from_dict(goal.state)
        result.append({
            "id": str(goal.pk), "goal_key": goal.goal_key, "workspace": goal.workspace,
            "agent": goal.agent, "status": goal.status, "reason": goal.reason,
            "why": WHY.get(goal.reason, goal.reason or goal.status),
            "since": state.updated_at,
        })
    return result
