"""The verifiable log's attack matrix: with the append-only triggers dropped
(as a DBA or an attacker with the database's credentials could), every rewrite of history
since a head the auditor kept is found by ``ledger verify --against``, even
those the per-goal chains cannot see (a chain rehashed consistently, an
idempotency key, a whole goal removed, a rolled-back backup).

Each attack is plain SQL on the tables, then the same command an auditor runs.
DDL is transactional on both databases: each test's changes roll back.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django_q.models import Schedule

from ledger.domain import RecordCheckpoint
from ledger.eventstore import chain, store, triggers
from ledger.log import merkle_store, sealing, signing
from ledger.models import Event, Goal, LogLeaf, LogNode, SigningKey, TreeHead
from tests.factories import GoalFactory, proof_of
from tests.helpers import ledger

pytestmark = pytest.mark.django_db


def sql(statement: str, *params: Any) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, list(params))


def pk(goal_id: Any) -> Any:
    return Goal._meta.pk.get_db_prep_value(goal_id, connection)


def json_value(data: Any) -> Any:
    return connection.ops.adapt_json_value(data, None)


def append_checkpoint(goal_id: str, step: str) -> None:
    state = store.load(goal_id)
    store.execute(goal_id, RecordCheckpoint(current_step=step, progress_pct=state.progress_pct,
                                            proof=proof_of(state)), actor="agent-1")


@dataclass
class World:
    goals: list[Goal]
    kept: Path  # the head the auditor saved, outside the database
    older: dict[str, Any]  # what a backup taken at an earlier head holds


@pytest.fixture
def world(tmp_path) -> World:
    goals = [GoalFactory(checkpoints=3), GoalFactory(checkpoints=4),
             GoalFactory(checkpoints=2, finish="completed")]
    older_head = sealing.seal().head
    older = {"head": older_head.id, "size": older_head.size,
             "last_event": Event.objects.latest("id").id,
             "goals": {g.pk: dict(Goal.objects.filter(pk=g.pk).values()[0]) for g in goals}}
    append_checkpoint(str(goals[0].pk), "after the older head")
    goals.append(GoalFactory(checkpoints=1))
    sealing.seal()
    kept = tmp_path / "head.json"
    kept.write_text(ledger("head")[1])
    # The log goes on after the kept head, as a live ledger's does.
    append_checkpoint(str(goals[1].pk), "after the kept head")
    sealing.seal()
    triggers.drop(connection)
    return World(goals, kept, older)


def against(world: World) -> tuple[int, str]:
    code, out, err = ledger("verify", "--against", str(world.kept))
    return code, out + err


def rehash_goal(goal_id: Any) -> None:
    """Recompute a goal's whole chain and its row's head, as a forger would."""
    previous = chain.GENESIS
    rows = Event.objects.filter(goal_id=goal_id).order_by("seq").values_list(
        "id", "seq", "kind", "data", "actor", "recorded_at")
    last_seq = 0
    for event_id, seq, kind, data, actor, recorded_at in rows:
        digest = chain.event_hash(previous, str(goal_id), seq, kind, data, actor, recorded_at)
        sql("UPDATE ledger_event SET prev_hash = %s, hash = %s WHERE id = %s", previous, digest,
            event_id)
        previous, last_seq = digest, seq
    sql("UPDATE ledger_goal SET version = %s, last_hash = %s WHERE id = %s", last_seq, previous,
        pk(goal_id))


# ------------------------------------------------------------------ the attacks


def edit_an_event(world: World) -> None:
    victim = Event.objects.get(goal=world.goals[1], seq=3)
    sql("UPDATE ledger_event SET data = %s WHERE id = %s",
        json_value({**victim.data, "current_step": "forged"}), victim.id)


def rehash_a_goal_and_replay_fix(world: World) -> None:
    """The issue's story: give a goal to another agent, recompute its chain,
    fix its row: verify, replay --check and doctor all pass."""
    goal = world.goals[0]
    sql("UPDATE ledger_event SET actor = %s WHERE goal_id = %s", "agent-mallory", pk(goal.pk))
    rehash_goal(goal.pk)
    assert ledger("replay", "--fix")[0] == 0
    code, out, _ = ledger("verify")
    assert code == 0 and "0 broken" in out  # the chains alone see nothing


def delete_a_middle_event(world: World) -> None:
    goal = world.goals[1]
    sql("DELETE FROM ledger_event WHERE goal_id = %s AND seq = 2", pk(goal.pk))
    sql("UPDATE ledger_event SET seq = seq - 1 WHERE goal_id = %s AND seq > 2", pk(goal.pk))
    rehash_goal(goal.pk)


def truncate_a_goal(world: World) -> None:
    goal = world.goals[1]
    last = Goal.objects.get(pk=goal.pk).version
    sql("DELETE FROM ledger_event WHERE goal_id = %s AND seq > %s", pk(goal.pk), last - 3)
    rehash_goal(goal.pk)
    ledger("replay", "--fix")
    assert ledger("verify")[0] == 0


def delete_a_whole_goal(world: World) -> None:
    goal = world.goals[2]
    ids = list(Event.objects.filter(goal=goal).values_list("id", flat=True))
    sql("DELETE FROM ledger_event WHERE goal_id = %s", pk(goal.pk))
    Schedule.objects.filter(name__contains=str(goal.pk)).delete()
    sql("DELETE FROM ledger_goal WHERE id = %s", pk(goal.pk))
    LogLeaf.objects.filter(event_id__in=ids).delete()  # and its leaves, to cover the tracks
    assert ledger("verify")[0] == 0


def reorder_two_events(world: World) -> None:
    """Swap two goals' first events in the tree: every event intact, the order not."""
    first = LogLeaf.objects.get(position=0)
    second = LogLeaf.objects.get(position=1)
    LogLeaf.objects.filter(position=0).update(event_id=-1)
    LogLeaf.objects.filter(position=1).update(event_id=first.event_id, hash=first.hash)
    LogLeaf.objects.filter(position=0).update(event_id=second.event_id, hash=second.hash)


def insert_a_forged_event(world: World) -> None:
    """An event slipped in below the newest head's horizon (id 0), chained onto
    the end of a goal, the goal row moved along: its chain is sound."""
    goal = Goal.objects.get(pk=world.goals[2].pk)
    last = Event.objects.get(goal=goal, seq=goal.version)
    data = {"current_step": "forged approval", "progress_pct": 100}
    digest = chain.event_hash(last.hash, str(goal.pk), goal.version + 1, "checkpoint.recorded",
                              data, "agent-1", last.recorded_at)
    sql("INSERT INTO ledger_event (id, goal_id, seq, kind, data, actor, recorded_at, "
        "idempotency_key, prev_hash, hash) VALUES (0, %s, %s, %s, %s, %s, %s, NULL, %s, %s)",
        pk(goal.pk), goal.version + 1, "checkpoint.recorded", json_value(data), "agent-1",
        connection.ops.adapt_datetimefield_value(last.recorded_at), last.hash, digest)
    sql("UPDATE ledger_goal SET version = %s, last_hash = %s WHERE id = %s", goal.version + 1,
        digest, pk(goal.pk))
    assert ledger("verify")[0] == 0


def rewrite_an_idempotency_key(world: World) -> None:
    victim = Event.objects.filter(goal=world.goals[0]).order_by("seq")[1]
    sql("UPDATE ledger_event SET idempotency_key = %s WHERE id = %s", "forged-key", victim.id)
    assert ledger("verify")[0] == 0  # not in the chain's hash


def restore_an_older_backup(world: World) -> None:
    """The database as a backup taken at the older head holds it: later events,
    leaves, nodes and heads gone, goal rows as they were then."""
    older = world.older
    later_goals = {g.pk for g in world.goals} - set(older["goals"])
    sql("DELETE FROM ledger_event WHERE id > %s", older["last_event"])
    for goal_id in later_goals:
        sql("DELETE FROM ledger_goal WHERE id = %s", pk(goal_id))
    for goal_id, row in older["goals"].items():
        Goal.objects.filter(pk=goal_id).update(**{k: v for k, v in row.items() if k != "id"})
    LogLeaf.objects.filter(position__gte=older["size"]).delete()
    for key in list(LogNode.objects.values_list("key", flat=True)):
        level, index = key >> 48, key & ((1 << 48) - 1)
        if (index + 1) << level > older["size"]:
            LogNode.objects.filter(key=key).delete()
    TreeHead.objects.filter(id__gt=older["head"]).delete()
    assert ledger("verify")[0] == 0


def rewrite_an_event_and_reseal_with_another_key(world: World, tmp: Path, settings: Any) -> None:
    """The thorough forger: edits an event consistently, then throws the tree
    away and seals everything again, signing with a key of their own."""
    goal = world.goals[1]
    sql("UPDATE ledger_event SET actor = %s WHERE goal_id = %s AND seq = 2", "agent-mallory",
        pk(goal.pk))
    rehash_goal(goal.pk)
    LogLeaf.objects.all().delete()
    LogNode.objects.all().delete()
    TreeHead.objects.all().delete()
    SigningKey.objects.all().delete()
    ours = settings.WAKELEDGER_SIGNING_KEY_FILE
    settings.WAKELEDGER_SIGNING_KEY_FILE = tmp / "forger.pem"  # the forger's own key
    sealing.seal()
    settings.WAKELEDGER_SIGNING_KEY_FILE = ours  # the server's file was never theirs
    assert ledger("verify")[0] == 0


def test_an_untouched_ledger_extends_the_kept_head(world):
    code, out = against(world)
    assert code == 0, out
    assert "extends the kept head" in out and "0 broken" in out


ATTACKS = [
    (edit_an_event, "no longer matches its leaf"),
    (rehash_a_goal_and_replay_fix, "no longer matches its leaf"),
    (delete_a_middle_event, "is gone (deleted from the database)"),
    (truncate_a_goal, "is gone (deleted from the database)"),
    (delete_a_whole_goal, "leaves were removed"),
    (reorder_two_events, "no longer matches its leaf"),
    (insert_a_forged_event, "older than the newest head"),
    (rewrite_an_idempotency_key, "no longer matches its leaf"),
    (restore_an_older_backup, "fewer than the kept head's"),
]


@pytest.mark.parametrize("attack, finding", ATTACKS, ids=[a.__name__ for a, _ in ATTACKS])
def test_every_attack_is_found_by_verify_against_the_kept_head(world, attack, finding):
    attack(world)
    code, out = against(world)
    assert code == 1, out
    assert finding in out, out
    assert "does NOT extend the kept head" in out


def test_a_rebuilt_tree_signed_with_another_key_is_found(world, tmp_path, settings):
    real_key = tmp_path / "real.pub"
    real_key.write_text(signing.signer().public_pem)
    rewrite_an_event_and_reseal_with_another_key(world, tmp_path, settings)
    code, out, err = ledger("verify", "--against", str(world.kept), "--key", str(real_key))
    out += err
    assert code == 1, out
    # The rebuilt tree is internally consistent; only the kept head shows the rewrite.
    assert "the kept head signs" in out and "were changed, removed, reordered or inserted" in out
    assert "a key not given here" in out  # the forger's heads are signed by an unknown key


def test_stored_heads_that_disagree_with_the_events_are_named(world):
    head = TreeHead.objects.order_by("id").first()
    TreeHead.objects.filter(id=head.id).update(root="ab" * 32)
    code, out = against(world)
    assert code == 1
    assert f"stored head {head.id} (size {head.size}) signs root {'ab' * 32}" in out
    assert f"signature invalid for key {head.key_id} (stored head {head.id})" in out


def test_a_damaged_stored_tree_is_found_even_when_every_leaf_is_intact(world):
    node = LogNode.objects.order_by("-key").first()
    LogNode.objects.filter(key=node.key).update(hash="00" * 32)
    code, out = against(world)
    level, index = node.key >> 48, node.key & ((1 << 48) - 1)
    # Named with its position (level/index), not just "the root differs".
    assert code == 1 and f"stored node {level}/{index} (leaves" in out, out


def test_a_kept_head_that_is_not_a_head_is_a_usage_error(world, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"size": 1}))
    code, _, err = ledger("verify", "--against", str(bad))
    assert code != 0 and "is not a tree head: the head has no root" in err
    code, _, err = ledger("verify", "--against", str(tmp_path / "missing.json"))
    assert code != 0 and "cannot read the head file" in err


def test_events_sealed_after_the_kept_head_are_not_findings(world):
    GoalFactory()
    code, out = against(world)
    assert code == 0 and "newer than the newest head are not sealed yet" in out, out
    assert merkle_store.size() < Event.objects.count()


def test_lowering_the_stored_heads_horizon_does_not_hide_a_forged_insert(world):
    insert_a_forged_event(world)
    TreeHead.objects.update(horizon=-1)  # the horizon is signed: every head now fails
    code, out = against(world)
    assert code == 1
    assert "event(s) 0 are older than the newest head" in out  # the kept head's horizon
    assert "signature invalid for key" in out
