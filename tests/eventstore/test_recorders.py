"""The append path's recorders (ledger/eventstore/appendsql.py) leave the same
rows: this database's fast recorder and Django's own cursor, given the same
commands at the same instants, write the same events, the same goal row and
the same chain, and the store decides the next command on the same state."""

import json
import uuid

import pytest
from django.db import connection

from ledger.domain import GoalState, ReleaseLease, RunGoal
from ledger.domain.commands import WakeRequest
from ledger.eventstore import appendsql, store, tallies
from ledger.eventstore.chain import event_hash
from ledger.models import Event, Goal, Tally
from tests.eventstore.test_store import _checkpoint, start_command
from tests.factories import completed, proof_of

pytestmark = pytest.mark.django_db(transaction=True)

COLUMNS = ("agent", "workspace_bound", "status", "reason", "lease_expires_at",
           "next_wake_at", "paused_until", "deadline_at", "attention", "created_at",
           "updated_at", "version")


def _one_goal(clock, workspace: str) -> str:
    """A goal's life in commands: several checkpoints (one refused), a
    release asking for a wake, a new lease, and the finish."""
    state = store.start(RunGoal(start_command(workspace=workspace, goal_id=str(uuid.uuid4())),
                                "agent-1", "a" * 64), actor="agent-1").state
    for pct in (10, 20, 35):
        clock.advance(seconds=7)
        state = store.execute(state.goal_id, _checkpoint(state, pct), actor="agent-1").state
    with pytest.raises(store.DomainError):
        store.execute(state.goal_id, _checkpoint(state, 5), actor="agent-1")
    clock.advance(minutes=3)
    wake = WakeRequest(900, reason="scheduled_progress")
    state = store.execute(state.goal_id, ReleaseLease(proof_of(state), wake),
                          actor="agent-1").state
    clock.advance(minutes=20)
    state = store.start(RunGoal(start_command(workspace=workspace, goal_id=state.goal_id),
                                "agent-1", "b" * 64), actor="agent-1").state
    state = store.execute(state.goal_id, completed(state), actor="agent-1").state
    return state.goal_id


def _rows(goal_id: str, workspace: str) -> tuple[dict, list[tuple], GoalState]:
    """The goal row and its events, its id and workspace spelled alike."""
    def same(data: object) -> str:
        return json.dumps(data, sort_keys=True).replace(goal_id, "G").replace(workspace, "W")

    goal = Goal.objects.values(*COLUMNS, "state", "last_hash").get(pk=goal_id)
    events = [(kind, same(data), *rest) for kind, data, *rest in
              Event.objects.filter(goal_id=goal_id).order_by("seq").values_list(
                  "kind", "data", "seq", "actor", "recorded_at", "idempotency_key")]
    return {**goal, "state": same(goal["state"])}, events, GoalState.from_dict(goal["state"])


def _tallied() -> dict[tuple[str, str], float]:
    """Every tally, a goal tally's shards summed."""
    found: dict[tuple[str, str], float] = {}
    for name, label, value in Tally.objects.values_list("name", "labels", "value"):
        key = (name, tallies.unsharded(label) if name in tallies.GOAL_TALLIES else label)
        found[key] = found.get(key, 0.0) + value
    return found


def _moved(before: dict, after: dict) -> dict:
    return {key: after.get(key, 0.0) - before.get(key, 0.0) for key in {*before, *after}
            if after.get(key, 0.0) != before.get(key, 0.0)}


def test_the_fast_recorder_and_djangos_cursor_leave_the_same_rows(clock, monkeypatch):
    connection.ensure_connection()
    fast = appendsql.recorder_for(connection)
    if isinstance(fast, appendsql.DjangoRecorder):
        pytest.skip(f"no fast recorder for {connection.vendor}")
    start = clock.current
    counted = _tallied()
    ours = _one_goal(clock, "/srv/fast")
    tallied_fast, counted = _moved(counted, _tallied()), _tallied()
    clock.current = start
    monkeypatch.setattr(appendsql, "recorder_for", lambda conn: appendsql.DjangoRecorder())
    store._states.clear()  # nothing the fast path wrote is reused
    reference = _one_goal(clock, "/srv/django")
    # The metrics' tallies moved alike (a goal's shard aside: it comes from its id).
    assert tallied_fast == _moved(counted, _tallied()) != {}
    goal_a, events_a, state_a = _rows(ours, "/srv/fast")
    goal_b, events_b, state_b = _rows(reference, "/srv/django")
    assert {k: goal_a[k] for k in COLUMNS} == {k: goal_b[k] for k in COLUMNS}
    assert events_a == events_b
    assert goal_a["state"] == goal_b["state"]
    assert state_a.version == state_b.version == len(events_a)
    for goal_id, last_hash in ((ours, goal_a["last_hash"]), (reference, goal_b["last_hash"])):
        rows = Event.objects.filter(goal_id=goal_id).order_by("seq")
        assert rows.last().hash == last_hash
        for row in rows:
            assert row.hash == event_hash(row.prev_hash, goal_id, row.seq, row.kind, row.data,
                                         row.actor, row.recorded_at), (goal_id, row.seq)
