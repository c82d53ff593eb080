"""The scheduled seal: new events enter the verifiable log and a head is signed.

The schedule is created (or brought in step with WAKELEDGER_SEAL_MINUTES)
after every ``migrate``, like the lease sweeper's and the prune's, so a
deployment that migrates seals without a manual step. The task runs the
very function ``manage.py ledger seal`` runs.
"""

import json
import logging
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django_q.models import Schedule

from ledger.log import sealing
from ledger.models import TreeHead
from ledger.services import loghealth
from scheduling import dispatch

logger = logging.getLogger(__name__)

SEAL = "scheduling.sealing.seal_log"
SEAL_NAME = "wakeledger-seal"


def seal_log() -> int:
    """Seal what committed since the last seal; returns the tree's size. Then
    whatever the log's state calls for is told (the alarm, a witness behind)."""
    try:
        return _seal()
    finally:
        try:
            loghealth.tell()
        except Exception as error:  # the seal's own outcome stands
            logger.warning("could not record the log's notifications: %s",
                           type(error).__name__)


def _seal() -> int:
    try:
        result = sealing.seal()
    except sealing.HorizonBusy as busy:
        # An append held its transaction open past the lock timeout: the next
        # run seals it. Nothing was written.
        logger.warning("seal skipped: %s", busy)
        return -1
    except sealing.LogInconsistent:
        # Logged as an ALARM and remembered by ledger.log.sealer_state; the
        # next run checks again (and alarms again) until a human acts.
        return -2
    if result.head is not None:
        logger.info("sealed %d event(s); signed head %d %s", result.appended,
                    result.head.size, result.head.root)
    return result.size


def push_witness(head: TreeHead) -> bool:
    """POST the new head to WAKELEDGER_HEAD_WITNESS_URL, if set: a copy outside
    the database, kept by someone else. One attempt, no redirects (the
    dispatcher's sender); a failure is logged and the next head goes anyway
    (each head extends the last, so a witness that missed one loses nothing
    it cannot check). Returns whether the witness took it."""
    url = settings.WAKELEDGER_HEAD_WITNESS_URL
    if not url:
        return False
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        logger.warning("WAKELEDGER_HEAD_WITNESS_URL is not an http(s) URL; no head pushed")
        return False
    body = json.dumps(head.as_dict(), sort_keys=True).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "wakeledger",
               "Idempotency-Key": f"tree-head-{head.size}"}
    # The dispatcher's sender: one POST, no redirects, no proxies, errors by class only.
    result = dispatch._send(url, body, headers, 10.0)
    if not result.ok:
        logger.warning("the head witness did not take head %d: %s", head.size, result.detail)
    return result.ok


def ensure_seal_schedule(**_: Any) -> None:
    """Exactly one seal schedule (post_migrate)."""
    Schedule.objects.update_or_create(
        name=SEAL_NAME,
        defaults={"func": SEAL, "schedule_type": Schedule.MINUTES,
                  "minutes": settings.WAKELEDGER_SEAL_MINUTES, "repeats": -1},
    )
