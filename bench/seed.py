"""Large histories, fast: one goal through the store, then copied in SQL.

Appending a million events through ``store.execute`` takes longer than the
whole benchmark may. So one template goal is written the legitimate way
(start, varied checkpoints, finish), and copied:

- ``clone_goals``: the template's goal row and events under new goal ids.
  The template is finished, so copies with the same workspace and goal key do
  not meet the one-active-goal constraints. Each copy's events fold into its
  stored projection exactly as the template's do (replay finds no
  difference); their hash chains do not verify (a hash covers the goal id),
  which replay does not look at.
- ``long_goal``: one goal whose history is the template's checkpoints repeated
  to ``events`` events (seq renumbered), then the finish; its projection is
  rewritten from its events (``projection.replay(fix=True)``) when asked.
"""

import uuid

from django.db import connection, transaction

from ledger.domain import Artifact, Finish, LeaseProof, RecordCheckpoint, RunGoal, StartGoal
from ledger.eventstore import projection, store, tallies
from ledger.models import Event, Goal

TOKEN = "0" * 64  # a lease token's digest: the seeding code holds the lease


def template(events: int) -> str:
    """A finished goal of ``events`` events (start + checkpoints + finish)."""
    goal_id = str(uuid.uuid4())
    proof = LeaseProof(TOKEN, 1)
    with transaction.atomic():
        outcome = store.start(RunGoal(StartGoal(goal_id=goal_id, workspace="/bench/replay",
                                                goal_key="bench", objective="benchmark",
                                                agent="agent-1"), "agent-1", TOKEN),
                              actor="agent-1")
        for i in range(events - outcome.state.version - 1):
            store.execute(goal_id, RecordCheckpoint(
                current_step=f"step {i}", progress_pct=min(99, i // 10),
                completed=(f"step {i - 1}",), next_actions=(f"step {i + 1}",),
                artifacts=(Artifact(f"out/{i % 20}.txt", "a" * 64, i),) if i < 20 else (),
                proof=proof,
            ), actor="agent-1")
        store.execute(goal_id, Finish(status="completed", summary="done", proof=proof),
                      actor="agent-1")
    return goal_id


def _columns(model: type) -> list[str]:
    return [f.column for f in model._meta.concrete_fields]


def _pk(goal_id: str) -> str:
    # Django stores a UUIDField as 32 hex digits on SQLite, as uuid on PostgreSQL.
    return uuid.UUID(goal_id).hex if connection.vendor == "sqlite" else goal_id


def clone_goals(source: str, copies: int) -> list[str]:
    goal_cols = [c for c in _columns(Goal) if c != "id"]
    event_cols = [c for c in _columns(Event) if c not in ("id", "goal_id")]
    ids = []
    with transaction.atomic(), connection.cursor() as cursor:
        for _ in range(copies):
            new = str(uuid.uuid4())
            cursor.execute(
                f"INSERT INTO ledger_goal (id, {', '.join(goal_cols)}) "
                f"SELECT %s, {', '.join(goal_cols)} FROM ledger_goal WHERE id = %s",
                [_pk(new), _pk(source)])
            cursor.execute(
                f"INSERT INTO ledger_event (goal_id, {', '.join(event_cols)}) "
                f"SELECT %s, {', '.join(event_cols)} FROM ledger_event WHERE goal_id = %s "
                f"ORDER BY seq", [_pk(new), _pk(source)])
            ids.append(new)
    tallies.recount()  # rows copied past the store: their goals-by-status tallies
    return ids


def long_goal(source: str, events: int, *, fix: bool) -> str:
    """A goal of ``events`` events: the source's checkpoints repeated, then its finish."""
    goal_id, = clone_goals_head(source)
    last = Goal.objects.get(pk=source).version  # the finish event's seq
    body = last - 2  # checkpoints are seq 2 .. last-1
    cols = [c for c in _columns(Event) if c not in ("id", "goal_id", "seq")]
    seq = last - 1  # the copied head ends at the last checkpoint
    with transaction.atomic(), connection.cursor() as cursor:
        while seq < events - 1:
            take = min(body, events - 1 - seq)
            cursor.execute(
                f"INSERT INTO ledger_event (goal_id, seq, {', '.join(cols)}) "
                f"SELECT %s, seq + %s, {', '.join(cols)} FROM ledger_event "
                f"WHERE goal_id = %s AND seq BETWEEN 2 AND %s ORDER BY seq",
                [_pk(goal_id), seq - 1, _pk(source), 1 + take])
            seq += take
        cursor.execute(
            f"INSERT INTO ledger_event (goal_id, seq, {', '.join(cols)}) "
            f"SELECT %s, %s, {', '.join(cols)} FROM ledger_event WHERE goal_id = %s AND seq = %s",
            [_pk(goal_id), seq + 1, _pk(source), last])
        cursor.execute("UPDATE ledger_goal SET version = %s WHERE id = %s",
                       [seq + 1, _pk(goal_id)])
    if fix:
        list(projection.replay([goal_id], fix=True))
    return goal_id


def clone_goals_head(source: str) -> list[str]:
    """A copy of ``source``'s goal row and its events but the last (the finish)."""
    goal_cols = [c for c in _columns(Goal) if c != "id"]
    event_cols = [c for c in _columns(Event) if c not in ("id", "goal_id")]
    new = str(uuid.uuid4())
    last = Goal.objects.get(pk=source).version
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO ledger_goal (id, {', '.join(goal_cols)}) "
            f"SELECT %s, {', '.join(goal_cols)} FROM ledger_goal WHERE id = %s",
            [_pk(new), _pk(source)])
        cursor.execute(
            f"INSERT INTO ledger_event (goal_id, {', '.join(event_cols)}) "
            f"SELECT %s, {', '.join(event_cols)} FROM ledger_event WHERE goal_id = %s "
            f"AND seq < %s ORDER BY seq", [_pk(new), _pk(source), last])
    tallies.recount()
    return [new]
