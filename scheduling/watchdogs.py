"""The scheduler's own rows: the lease sweeper's, ensured after every migrate.

A goal's wake rows are written by the command that calls for them
(``ledger.services.followup.follow_schedules``, in the command's transaction); their
names and task paths are ``ledger.services.schedules``'.
"""

from ledger.domain.watchdogs import requested_schedule_name, reset_schedule_name, schedule_name
from ledger.operators.doctor import ensure_sweeper
from ledger.services.schedules import FIRE, SWEEPER_NAME

__all__ = ["FIRE", "SWEEPER_NAME", "ensure_sweeper", "requested_schedule_name",
           "reset_schedule_name", "schedule_name"]
