"""Housekeeping that django-q2 runs on a schedule: pruning idempotency records
and the ``/mcp`` lease rows no lease stands behind, and the hourly ``ledger
doctor --fix`` (schedule rows repaired by content).

The schedule is created (or brought in step) after every ``migrate``, like the
lease sweeper's, so a deployment that migrates has it without a manual step.
The task runs the very function ``manage.py ledger prune`` runs.
"""

import logging
from typing import Any

from django.conf import settings
from django_q.models import Schedule

from ledger.access import accounts
from ledger.operators import doctor

logger = logging.getLogger(__name__)

PRUNE = "scheduling.maintenance.prune"
PRUNE_NAME = "wakeledger-idempotency-prune"


def prune() -> int:
    """Delete idempotency records older than their retention, and the MCP
    lease rows no lease stands behind any more. Returns how many rows."""
    hours = settings.WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS
    records = accounts.prune_idempotency_records()
    if records:
        logger.info("pruned %d idempotency record(s) older than %d h", records, hours)
    leases = accounts.prune_mcp_leases()
    if leases:
        logger.info("pruned %d MCP lease row(s) whose lease ended over %d h ago", leases, hours)
    return records + leases


def ensure_prune_schedule(**_: Any) -> None:
    """The prune's hourly schedule, exactly one of it (post_migrate). Hourly:
    a record then outlives its retention by at most an hour, and each run
    deletes about an hour's worth of records, in one indexed statement."""
    Schedule.objects.update_or_create(
        name=PRUNE_NAME,
        defaults={"func": PRUNE, "schedule_type": Schedule.HOURLY, "repeats": -1},
    )


def repair_schedules() -> int:
    """``ledger doctor --fix``, hourly: rows missing, exhausted, late or
    orphaned are repaired (each an event on its goal), and the sweeper's own
    row restored. The sweeper repairs a goal's rows as soon as a deadline
    passes; this also catches what no deadline shows (an orphaned row, an
    exhausted one whose slot is still ahead). Returns how many repairs."""
    done = doctor.fix()
    for line in done:
        logger.warning("schedule repair: %s", line)
    return len(done)
