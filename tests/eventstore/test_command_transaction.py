"""The command's own transaction (ledger.eventstore.txn) is Django's outermost
atomic() step for step: the same connection state inside and after it, the
same commits and rollbacks, on_commit hooks after a COMMIT and never after a
rollback, savepoints and durable blocks nested in it as under atomic()."""

from collections.abc import Callable

import pytest
from django.db import DEFAULT_DB_ALIAS, connections, transaction

from ledger.domain import GoalState, LeaseProof, RecordCheckpoint
from ledger.eventstore import store, txn
from ledger.models import Event, Goal
from tests.factories import GoalFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _state(conn) -> tuple:
    """Every piece of the connection's transaction state atomic() keeps."""
    return (conn.in_atomic_block, conn.get_autocommit(), conn.commit_on_exit,
            conn.needs_rollback, len(conn.atomic_blocks), len(conn.savepoint_ids),
            len(conn.run_on_commit), conn.run_commit_hooks_on_set_autocommit_on,
            conn.closed_in_transaction)


class Boom(Exception):
    pass


def _inner_ok(conn, log):
    Goal.objects.filter(goal_key="none").update(reason="x")
    transaction.on_commit(lambda: log.append(("hook", conn.in_atomic_block)))


def _inner_raises(conn, log):
    transaction.on_commit(lambda: log.append("hook"))
    raise Boom


def _inner_savepoint_rolled_back(conn, log):
    transaction.on_commit(lambda: log.append("outer hook"))
    try:
        with transaction.atomic():
            transaction.on_commit(lambda: log.append("inner hook"))
            log.append(("inner", _state(conn)))
            raise Boom
    except Boom:
        pass


def _inner_marks_rollback(conn, log):
    transaction.on_commit(lambda: log.append("hook"))
    transaction.set_rollback(True)


def _inner_durable(conn, log):
    with transaction.atomic(durable=True):
        pass


SCENARIOS: dict[str, Callable] = {
    "commits": _inner_ok,
    "raises": _inner_raises,
    "savepoint rolled back inside": _inner_savepoint_rolled_back,
    "set_rollback": _inner_marks_rollback,
    "durable nested": _inner_durable,
}


def _run(block, scenario: Callable) -> tuple[list, tuple, str]:
    conn = connections[DEFAULT_DB_ALIAS]
    log: list = []
    try:
        with block(conn):
            log.append(("inside", _state(conn)))
            scenario(conn, log)
    except (Boom, RuntimeError) as exc:
        outcome = type(exc).__name__
    else:
        outcome = "ok"
    return log, _state(conn), outcome


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_command_transaction_is_atomic_step_for_step(name):
    conn = connections[DEFAULT_DB_ALIAS]
    conn.ensure_connection()
    theirs = _run(lambda c: transaction.atomic(), SCENARIOS[name])
    ours = _run(lambda c: txn.command(c, savepoint=True), SCENARIOS[name])
    assert isinstance(txn.command(conn, savepoint=True), txn._Outermost)
    assert ours == theirs
    # Back in autocommit with nothing pending, whatever happened.
    assert ours[1] == (False, True, True, False, 0, 0, 0, False, False)


def test_inside_an_outer_block_it_is_atomic_itself():
    conn = connections[DEFAULT_DB_ALIAS]
    with transaction.atomic():
        assert isinstance(txn.command(conn, savepoint=True), transaction.Atomic)
    conn.set_autocommit(False)
    try:
        assert isinstance(txn.command(conn, savepoint=False), transaction.Atomic)
    finally:
        conn.rollback()
        conn.set_autocommit(True)


def _checkpoint(goal, step: str) -> RecordCheckpoint:
    state = GoalState.from_dict(goal.state)
    return RecordCheckpoint(current_step=step, progress_pct=0,
                            proof=LeaseProof(state.lease["token_sha256"],
                                             state.lease["generation"]))


def test_an_effects_on_commit_hook_runs_after_the_commit_and_never_after_a_rollback(
        monkeypatch):
    goal = GoalFactory()
    seen: list = []

    def effect(goal_id, outcome):
        step = outcome.state.current_step

        def hook():
            # After the COMMIT: out of the block, and another connection's
            # view (the row as committed) already has the event.
            seen.append((step, connections[DEFAULT_DB_ALIAS].in_atomic_block,
                         Event.objects.filter(goal_id=goal_id, seq=outcome.state.version)
                         .exists()))

        transaction.on_commit(hook)
        if step == "fails":
            raise Boom

    monkeypatch.setattr(store, "_effects", [effect])
    store.execute(goal.pk, _checkpoint(goal, "works"), actor="agent-1")
    with pytest.raises(Boom):
        store.execute(goal.pk, _checkpoint(goal, "fails"), actor="agent-1")
    assert seen == [("works", False, True)]
    goal.refresh_from_db()
    assert goal.state["current_step"] == "works"
    assert _state(connections[DEFAULT_DB_ALIAS])[:5] == (False, True, True, False, 0)


def test_a_command_in_an_outer_block_rolls_back_with_it():
    goal = GoalFactory()
    version = goal.version
    with pytest.raises(Boom), transaction.atomic():
        store.execute(goal.pk, _checkpoint(goal, "undone"), actor="agent-1")
        raise Boom
    goal.refresh_from_db()
    assert goal.version == version
    assert not Event.objects.filter(goal=goal, seq=version + 1).exists()
