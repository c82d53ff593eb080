"""Notifications from the scheduler's side: the task that sends (queued
after the commit of a command that recorded a flip,
``ledger.services.followup.record_flip``) and the sweeper's pass
(reminders, digest, the scheduler's own standing, delivery and retries).
The use cases are ``ledger.services.notifications``; this module only wires
them to django-q2."""

import logging

from django.db import DatabaseError

from ledger.services import notifications

logger = logging.getLogger(__name__)



def send() -> int:
    """The task: deliver every due notification."""
    return notifications.send_due()


def tick() -> int:
    """The sweeper's pass: a notice failing here must not fail the sweep."""
    try:
        return notifications.tick()
    except DatabaseError as error:
        logger.warning("notifications not processed this pass: %s", type(error).__name__)
        return 0
