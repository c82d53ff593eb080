"""What a caller may read of the goals: the ones it may see (an agent its
own, everyone else all), one goal's body, its checkpoint contract, its
resume packet, a page of its events. Reads of the projection, no locks."""

import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from ledger.domain import GoalState
from ledger.domain.smartwake import resume_packet
from ledger.domain.validation import canonical_workspace
from ledger.models import Event, Goal, LogLeaf
from ledger.services.bodies import goal_body
from ledger.services.caller import Caller, GoalNotFound


def visible_goals(caller: Caller) -> QuerySet[Goal]:
    """The goals this caller may see: ``GoalState.seen_by`` as a query (the
    projection's indexed ``agent`` column is the state's agent)."""
    goals = Goal.objects.all()
    if caller.owner is not None:
        goals = goals.filter(agent=caller.owner)
    return goals


def filtered(caller: Caller, *, status: str = "", reason: str = "", agent: str = "",
             workspace: str = "") -> QuerySet[Goal]:
    """GET /goals' rows: the visible goals, narrowed by the filters given."""
    rows = visible_goals(caller)
    for name, value in (("status", status), ("reason", reason), ("agent", agent)):
        if value:
            rows = rows.filter(**{name: value})
    if workspace:
        rows = rows.filter(workspace=canonical_workspace(workspace))
    return rows


def bodies(rows: Any) -> list[dict[str, Any]]:
    """The bodies of a page of Goal rows (read with their ``state``)."""
    return [goal_body(GoalState.from_dict(goal.state)) for goal in rows]


def state(caller: Caller, goal_id: str) -> GoalState:
    """A goal this caller may see, from its projection (GoalNotFound otherwise,
    for a malformed id too)."""
    try:
        pk = uuid.UUID(str(goal_id))
    except ValueError:
        raise GoalNotFound(f"{goal_id!r} is not a goal id.") from None
    row = visible_goals(caller).filter(pk=pk).values_list("state", flat=True).first()
    if row is None:
        raise GoalNotFound(f"No goal {goal_id}.")
    return GoalState.from_dict(row)


def goal(caller: Caller, goal_id: str) -> dict[str, Any]:
    return goal_body(state(caller, goal_id))


def contract(caller: Caller, goal_id: str) -> dict[str, Any]:
    """The smart-wake checkpoint contract."""
    return state(caller, goal_id).checkpoint_contract()


def resume(caller: Caller, goal_id: str) -> dict[str, Any]:
    """The resume packet: where to pick up, exactly."""
    return resume_packet(state(caller, goal_id))


@dataclass(frozen=True)
class EventPage:
    events: list[dict[str, Any]]
    next_after: int | None

    def as_dict(self) -> dict[str, Any]:
        return {"events": self.events, "next_after": self.next_after}


def events(caller: Caller, goal_id: str, *, after: int, limit: int) -> EventPage:
    """A goal's events after ``after``, in seq order, ``limit`` at most."""
    goal_id = state(caller, goal_id).goal_id
    rows = list(Event.objects.filter(goal_id=goal_id, seq__gt=after).order_by("seq")
                .values("id", "seq", "kind", "data", "actor", "recorded_at", "prev_hash",
                        "hash")[:limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    # Each event's place in the verifiable log (None until it is sealed): what
    # GET /ledger/proof/inclusion?event=ID proves.
    positions = dict(LogLeaf.objects.filter(event_id__in=[r["id"] for r in rows])
                     .values_list("event_id", "position"))
    for row in rows:
        row["recorded_at"] = row["recorded_at"].isoformat()
        row["position"] = positions.get(row["id"])
    return EventPage(rows, rows[-1]["seq"] if more else None)
