"""Commands: what someone asks of a goal. ``decide`` turns one into events."""

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class StartGoal:
    """Start the goal for (workspace, goal_key), with its plan as the first checkpoint."""

    goal_id: str
    workspace: str
    goal_key: str
    objective: str
    done_criteria: tuple[str, ...] = ()
    next_actions: tuple[str, ...] = ()
    agent: str = ""


@dataclass(frozen=True, slots=True)
class Artifact:
    path: str
    sha256: str
    bytes: int
    previous_sha256: str | None = None


@dataclass(frozen=True, slots=True)
class RecordCheckpoint:
    current_step: str
    progress_pct: int
    completed: tuple[str, ...] = ()
    next_actions: tuple[str, ...] = ()
    artifacts: tuple[Artifact, ...] = ()
    errors: tuple[str, ...] = ()
    note: str = ""


FINISH_STATUSES = ("completed", "failed", "blocked")


@dataclass(frozen=True, slots=True)
class Finish:
    status: str  # one of FINISH_STATUSES
    summary: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


Command = StartGoal | RecordCheckpoint | Finish
