"""The pure domain of Wake Ledger: commands, events, GoalState, decide and evolve.

Nothing in this package imports Django. The store, the API, the admin and the
scheduler are shells around it.
"""

# Every kind, loaded before anything decodes.
from ledger.domain import kinds
from ledger.domain.codec import Unreadable
from ledger.domain.commands import (
    AcquireLease,
    Artifact,
    Finish,
    Heartbeat,
    LeaseProof,
    RecordCheckpoint,
    ReleaseLease,
    ReleaseWorkspace,
    RunGoal,
    StartGoal,
)
from ledger.domain.decider import COMMANDS, Command, Decision, decide, decision, evolve, fold
from ledger.domain.errors import DomainError, GoalTerminal, InvalidCommand
from ledger.domain.events import Event, iso
from ledger.domain.leases import lease_refusal, lease_stale_at
from ledger.domain.parts import iso_text
from ledger.domain.state import ACTIVE_STATUSES, STATUSES, TERMINAL_STATUSES, GoalState

__all__ = [
    "ACTIVE_STATUSES",
    "COMMANDS",
    "STATUSES",
    "TERMINAL_STATUSES",
    "AcquireLease",
    "Artifact",
    "Command",
    "Decision",
    "DomainError",
    "Event",
    "Finish",
    "GoalState",
    "GoalTerminal",
    "Heartbeat",
    "InvalidCommand",
    "LeaseProof",
    "RecordCheckpoint",
    "ReleaseLease",
    "ReleaseWorkspace",
    "RunGoal",
    "StartGoal",
    "Unreadable",
    "decide",
    "decision",
    "evolve",
    "fold",
    "iso",
    "iso_text",
    "kinds",
    "lease_refusal",
    "lease_stale_at",
]
