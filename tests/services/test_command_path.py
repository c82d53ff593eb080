"""One way through the layers: the store records a command's events (and
their tallies), nothing else; the use case's one entry (``caller.run``) opens
the transaction and then writes what the events call for (``follow_up``: the
goal's django-q2 rows, the outbox, notifications), all committed together.
Nothing registered at start-up writes from inside the store."""

import pytest
from django.db import transaction
from django_q.models import Schedule

from ledger.domain import RunGoal
from ledger.domain.watchdogs import PrepareWatchdog, schedule_name
from ledger.eventstore import store
from ledger.models import Event
from ledger.services import caller
from tests.eventstore.test_store import start_command
from tests.factories import proof_of

pytestmark = pytest.mark.django_db(transaction=True)


def _goal(workspace: str):
    return store.start(RunGoal(start_command(workspace=workspace), "agent-1", "a" * 64),
                       actor="agent-1").state


def test_the_store_records_events_and_the_use_case_writes_what_they_cause(clock):
    alone = _goal("/srv/alone")
    store.execute(alone.goal_id, PrepareWatchdog(proof_of(alone)), actor="agent-1")
    assert Event.objects.filter(goal_id=alone.goal_id, kind="receipt.recorded").exists()
    assert not Schedule.objects.filter(name=schedule_name(alone.goal_id)).exists()

    used = _goal("/srv/used")
    caller.run(caller.Caller("agent-1", "agent-1"), used.goal_id,
               PrepareWatchdog(proof_of(used)))
    assert Schedule.objects.filter(name=schedule_name(used.goal_id)).count() == 1


def test_a_use_case_inside_a_requests_transaction_commits_or_rolls_back_with_it(clock):
    """The request-level unit (an Idempotency-Key's): the command and what it
    causes join the request's transaction, and leave with its rollback."""
    state = _goal("/srv/unit")
    with transaction.atomic():
        caller.run(caller.Caller("agent-1", "agent-1"), state.goal_id,
                   PrepareWatchdog(proof_of(state)))
        transaction.set_rollback(True)
    assert not Schedule.objects.filter(name=schedule_name(state.goal_id)).exists()
    assert store.load(state.goal_id).version == state.version
