"""The pure domain of Wake Ledger: commands, events, GoalState, decide and evolve.

Nothing in this package imports Django. The store, the API, the admin and the
scheduler are shells around it.
"""

from ledger.domain.commands import Artifact, Command, Finish, RecordCheckpoint, StartGoal
from ledger.domain.decider import decide, evolve, fold, iso
from ledger.domain.errors import DomainError, GoalTerminal, InvalidCommand
from ledger.domain.events import TERMINAL_ALLOWED_KINDS, Event
from ledger.domain.state import ACTIVE_STATUSES, STATUSES, TERMINAL_STATUSES, GoalState

__all__ = [
    "ACTIVE_STATUSES",
    "STATUSES",
    "TERMINAL_ALLOWED_KINDS",
    "TERMINAL_STATUSES",
    "Artifact",
    "Command",
    "DomainError",
    "Event",
    "Finish",
    "GoalState",
    "GoalTerminal",
    "InvalidCommand",
    "RecordCheckpoint",
    "StartGoal",
    "decide",
    "evolve",
    "fold",
    "iso",
]
