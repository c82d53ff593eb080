"""Commands: what someone asks of a goal. ``decide`` turns one into events.

Commands carry facts the shell gathered (who asks, which other goal holds a
workspace) but never decide anything themselves. Lease tokens arrive here
only as SHA-256 digests: the raw token never enters the domain.
"""

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class LeaseProof:
    """What a fenced call presents: the digest of its lease token and the generation."""

    token_sha256: str
    generation: int


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
    policy: dict[str, Any] = field(default_factory=dict)
    session: dict[str, Any] = field(default_factory=dict)
    timeout_seconds: int | None = None
    estimated_duration_seconds: int | None = None
    # Facts from the store: the active goal of the same agent that already
    # holds this workspace or session key, if any (bindings are per agent).
    workspace_bound_by: str | None = None
    session_bound_by: str | None = None
    # The dispatcher names the server's operators configured (None: unchecked).
    dispatchers: frozenset[str] | None = None
    # Seconds in one minute of cadence_minutes (60; the end-to-end tests
    # shrink it). The watchdog interval is frozen into the goal at start.
    cadence_unit_seconds: int = 60
    # The operator's caps on agent-chosen durations (policy.DEFAULT_CAPS's
    # names; None: the domain's defaults).
    caps: dict[str, int] | None = None


@dataclass(frozen=True, slots=True)
class RunGoal:
    """Start (or find) the goal and try to take its lease in the same command:
    what an agent does when it begins or resumes work."""

    start: StartGoal
    holder: str
    token_sha256: str


@dataclass(frozen=True, slots=True)
class AcquireLease:
    holder: str
    token_sha256: str


@dataclass(frozen=True, slots=True)
class Heartbeat:
    proof: LeaseProof | None


@dataclass(frozen=True, slots=True)
class WakeRequest:
    """A one-off wake the agent asks for at its turn boundary ("wake me in N
    minutes"): in ``in_seconds`` or ``at`` (ISO 8601 with an offset), with why."""

    in_seconds: int | None = None
    at: str = ""
    reason: str = "timeout_recovery"


@dataclass(frozen=True, slots=True)
class ReleaseLease:
    proof: LeaseProof | None
    wake: WakeRequest | None = None


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
    release_lease: bool = False
    proof: LeaseProof | None = None
    wake: WakeRequest | None = None  # only with release_lease


FINISH_STATUSES = ("completed", "failed", "blocked")


@dataclass(frozen=True, slots=True)
class Evidence:
    """What shows one done criterion holds: a link, a command and its result."""

    criterion: str  # the exact text of one of the goal's done criteria
    evidence: str


@dataclass(frozen=True, slots=True)
class Finish:
    status: str  # one of FINISH_STATUSES
    summary: str = ""
    proof: LeaseProof | None = None
    # With completed: one item per done criterion, and a summary (the seeds
    # never mark completion without acceptance evidence).
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True, slots=True)
class ReleaseWorkspace:
    """Unbind the goal's workspace: by the lease holder (proof) or an operator."""

    proof: LeaseProof | None = None
    by_operator: bool = False
    reason: str = ""


# The commands defined here. The whole catalogue (these, plus the wake, run,
# approval and operator commands of watchdogs.py, claims.py, jobs.py and runs.py) is
# ``ledger.domain.decider.COMMANDS``: one place lists every command and the
# rule that decides it.
CoreCommand = (StartGoal | RunGoal | AcquireLease | Heartbeat | ReleaseLease | RecordCheckpoint
               | Finish | ReleaseWorkspace)
