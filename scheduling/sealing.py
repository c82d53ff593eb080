"""The scheduled seal: new events enter the verifiable log and a head is signed.

The schedule is created (or brought in step with WAKELEDGER_SEAL_MINUTES)
after every ``migrate``, like the lease sweeper's and the prune's, so a
deployment that migrates seals without a manual step. The task runs the
very function ``manage.py ledger seal`` runs.
"""

import logging
from typing import Any

from django.conf import settings
from django_q.models import Schedule

from ledger import sealing

logger = logging.getLogger(__name__)

SEAL = "scheduling.sealing.seal_log"
SEAL_NAME = "wakeledger-seal"


def seal_log() -> int:
    """Seal what committed since the last seal; returns the tree's size."""
    try:
        result = sealing.seal()
    except sealing.HorizonBusy as busy:
        # An append held its transaction open past the lock timeout: the next
        # run seals it. Nothing was written.
        logger.warning("seal skipped: %s", busy)
        return -1
    if result.head is not None:
        logger.info("sealed %d event(s); signed head %d %s", result.appended,
                    result.head.size, result.head.root)
    return result.size


def ensure_seal_schedule(**_: Any) -> None:
    """Exactly one seal schedule (post_migrate)."""
    Schedule.objects.update_or_create(
        name=SEAL_NAME,
        defaults={"func": SEAL, "schedule_type": Schedule.MINUTES,
                  "minutes": settings.WAKELEDGER_SEAL_MINUTES, "repeats": -1},
    )
