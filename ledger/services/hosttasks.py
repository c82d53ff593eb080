"""Following a goal as a host's task: the task's id, derived (nothing is
stored, so a task outlives the client's restart and ours, and any web
process answers it), and what the task shows now.

The id is bound to who asks: it is the goal's id with an HMAC over the
caller's account and the goal (``ledger.access.derivation``), so the same
caller always gets the same id back, and another caller's id — or a forged
one — names no task of theirs. It is never written anywhere (the event
log, the database, the logs): a host keeps it; we derive it again.
"""

import base64
import binascii
import hmac
import uuid
from dataclasses import dataclass
from typing import Any

from ledger.access.derivation import derived
from ledger.domain import GoalState
from ledger.domain.hosttasks import CANCEL_REASON, TaskView, task_view
from ledger.domain.parts import iso_text
from ledger.domain.state import STOPPED
from ledger.eventstore import clock
from ledger.models import Event, LogLeaf
from ledger.services import reads
from ledger.services.caller import Caller

__all__ = ["CANCEL_REASON", "Ending", "Followed", "follow", "goal_of", "task_id"]

PREFIX = "wlt1."
_MAC_BYTES = 16
# The events that end a goal: the one a terminal task reports (with its place in
# the verifiable log, where the host can have it proven).
ENDING_KINDS = ("goal.completed", "goal.failed", "goal.stopped")


def _mac(subject: str, goal_id: uuid.UUID) -> bytes:
    text = derived("mcp-task", subject, str(goal_id))
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))[:_MAC_BYTES]


def task_id(subject: str, goal_id: str | uuid.UUID) -> str:
    """The task id of a goal as ``subject`` (the caller's account) follows it."""
    goal = uuid.UUID(str(goal_id))
    raw = goal.bytes + _mac(subject, goal)
    return PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def goal_of(subject: str, given: object) -> str | None:
    """The goal a task id names for this subject, or None (malformed, forged,
    or another caller's)."""
    if not isinstance(given, str) or not given.startswith(PREFIX) or len(given) > 80:
        return None
    body = given[len(PREFIX):]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 16 + _MAC_BYTES:
        return None
    goal = uuid.UUID(bytes=raw[:16])
    if not hmac.compare_digest(raw[16:], _mac(subject, goal)):
        return None
    return str(goal)


@dataclass(frozen=True)
class Ending:
    """The event that ended a goal: its id, kind, payload and its leaf index in
    the verifiable log (None until the sealer has sealed it)."""

    event_id: int
    kind: str
    data: dict[str, Any]
    recorded_at: str
    position: int | None

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.event_id, "kind": self.kind, "recorded_at": self.recorded_at,
                "log_index": self.position}


@dataclass(frozen=True)
class Followed:
    """A goal as its task shows it now."""

    state: GoalState
    view: TaskView
    ending: Ending | None

    @property
    def goal_id(self) -> str:
        return self.state.goal_id

    def created_at(self) -> str:
        return iso_text(self.state.created_at)

    def updated_at(self) -> str:
        return iso_text(self.state.updated_at or self.state.created_at)

    def outcome(self) -> dict[str, Any]:
        """A terminal task's result: the goal's end, with its evidence and its
        event (and log index) for a completion. Our fields and the agent's own
        summary and evidence, never a provider's text."""
        state = self.state
        answer: dict[str, Any] = {"goal_id": state.goal_id, "status": state.status,
                                  "task_status": self.view.status,
                                  "message": self.view.message}
        if self.ending is not None:
            if self.ending.kind == "goal.completed":
                answer["summary"] = self.ending.data.get("summary", "")
                answer["evidence"] = self.ending.data.get("evidence", [])
            else:
                answer["reason"] = self.ending.data.get("reason", "") if self.ending.kind \
                    == "goal.failed" else ""
            answer["event"] = self.ending.as_dict()
        return answer


def ending(goal_id: str) -> Ending | None:
    row = (Event.objects.filter(goal_id=goal_id, kind__in=ENDING_KINDS).order_by("-seq")
           .values("id", "kind", "data", "recorded_at").first())
    if row is None:
        return None
    position = LogLeaf.objects.filter(event_id=row["id"]).values_list("position",
                                                                        flat=True).first()
    return Ending(row["id"], row["kind"], row["data"], row["recorded_at"].isoformat(),
                  position)


def follow(caller: Caller, goal_id: str) -> Followed:
    """The goal's task as this caller may see it (GoalNotFound otherwise)."""
    state = reads.state(caller, goal_id)
    ended = ending(state.goal_id) if state.terminal else None
    stop_reason = ""
    if state.status == STOPPED and ended is not None and ended.kind == "goal.stopped":
        stop_reason = str(ended.data.get("reason", ""))
    return Followed(state, task_view(state, clock.now(), stop_reason=stop_reason), ended)

