"""Notifications from the scheduler's side (issue 38): the store effect that
records a flip and asks for it to be sent once the command commits, the task
that sends, and the sweeper's pass (reminders, digest, the scheduler's own
standing, delivery and retries). The use cases are
``ledger.services.notifications``; this module only wires them to django-q2."""

import logging

from django.db import DatabaseError, transaction
from django_q.tasks import async_task

from ledger.services import notifications
from ledger.services.effects import Outcome

logger = logging.getLogger(__name__)

SEND_TASK = "scheduling.notify.send"


def record(goal_id: str, outcome: Outcome) -> None:
    """Store effect: record the flip's notifications in the command's
    transaction; after the commit, a task sends them (within seconds, on the
    ORM broker's one-second poll). Should that task never run, the sweeper's
    next pass sends them: recorded is never lost."""
    if notifications.record(goal_id, outcome):
        transaction.on_commit(_ask_to_send)


def _ask_to_send() -> None:
    try:
        async_task(SEND_TASK, task_name="notify.send")
    except DatabaseError as error:  # the sweeper sends it instead
        logger.warning("could not queue the notification sender: %s", type(error).__name__)


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
