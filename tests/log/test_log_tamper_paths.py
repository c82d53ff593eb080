"""Tamper paths, each as a database administrator with SQL only (no
key, no files): the triggers dropped, plain SQL on the tables, then the
commands an operator and an auditor run. Each was measured to pass before;
each is caught now, by the sealer's record beside its key (it refuses to sign
and raises the alarm) and by ``verify --against``, which trusts nothing stored.

On PostgreSQL in the PostgreSQL half, SQLite in the other: the SQL is the same.
"""

import json
import logging
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import connection

from ledger.eventstore import triggers
from ledger.log import merkle_store, sealer_state, sealing
from ledger.models import Event, Goal, LogLeaf, LogNode, TreeHead
from tests.factories import GoalFactory
from tests.helpers import ledger
from tests.log.test_log_attacks import append_checkpoint, pk, rehash_goal, sql
from wakeledger_verify import merkle, notes

pytestmark = pytest.mark.django_db


@dataclass
class World:
    goals: list[Goal]
    kept: Path  # the auditor's head, outside the database
    kept_size: int
    record: Path  # the sealer's record, beside its key


@pytest.fixture
def world(tmp_path, sealer_record) -> World:
    goals = [GoalFactory(checkpoints=3), GoalFactory(checkpoints=2)]
    sealing.seal()
    kept = tmp_path / "head.json"
    kept.write_text(ledger("head")[1])
    kept_size = json.loads(kept.read_text())["size"]
    # The log goes on; the newest head is one no auditor kept.
    append_checkpoint(str(goals[0].pk), "after the kept head")
    goals.append(GoalFactory(checkpoints=2))
    sealing.seal()
    assert sealer_record.exists()
    triggers.drop(connection)
    return World(goals, kept, kept_size, sealer_record)


def against(path: Path) -> tuple[int, str]:
    code, out, err = ledger("verify", "--against", str(path))
    return code, out + err


def drop_tree_above(size: int) -> None:
    """What an administrator deletes to have the sealer seal again from ``size``."""
    sql("DELETE FROM ledger_treehead WHERE size > %s", size)
    sql("DELETE FROM ledger_logleaf WHERE position >= %s", size)
    for key in list(LogNode.objects.values_list("key", flat=True)):
        level, index = key >> 48, key & ((1 << 48) - 1)
        if (index + 1) << level > size:
            sql("DELETE FROM ledger_lognode WHERE key = %s", key)


def test_the_sealer_keeps_its_latest_checkpoint_beside_its_key(world):
    newest = TreeHead.objects.order_by("-id").first()
    assert world.record.read_text() == newest.checkpoint
    assert stat.S_IMODE(world.record.stat().st_mode) == 0o600
    checkpoint = notes.parse_checkpoint(notes.split(newest.checkpoint)[0])
    assert (checkpoint.size, checkpoint.root.hex()) == (newest.size, newest.root)
    assert sealer_state.inconsistency_alarm() is None
    code, out = against(world.kept)
    assert code == 0, out
    code, out, _ = ledger("head", "--checkpoint")
    assert code == 0 and out == newest.checkpoint


def test_a_corrupted_stored_node_is_found_with_its_position(world):
    key = LogNode.objects.order_by("key").values_list("key", flat=True)[1]
    level, index = key >> 48, key & ((1 << 48) - 1)
    sql("UPDATE ledger_lognode SET hash = %s WHERE key = %s", "ab" * 32, key)
    code, out = against(world.kept)
    assert code == 1, out
    assert (f"stored node {level}/{index} (leaves {index << level} to "
            f"{((index + 1) << level) - 1}) is {'ab' * 32}") in out


def test_the_offline_export_check_names_a_corrupted_stored_node(world, tmp_path, capsys):
    from ledger.log import export
    from wakeledger_verify import cli

    key = LogNode.objects.order_by("key").values_list("key", flat=True)[1]
    level, index = key >> 48, key & ((1 << 48) - 1)
    saved = LogNode.objects.get(key=key).hash
    sql("UPDATE ledger_lognode SET hash = %s WHERE key = %s", "ab" * 32, key)
    # A goal whose events' inclusion paths are built with that node.
    bundle = next(b for b in (export.bundle(str(g.pk)) for g in world.goals)
                  if f"{level}/{index}" in b["subtrees"])
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(bundle))
    assert cli.main([str(path)]) == 1
    out = capsys.readouterr().out
    assert (f"inclusion proof does not match root: the stored node {level}/{index} (leaves "
            f"{index << level} to {((index + 1) << level) - 1}) is wrong") in out, out
    # A stored leaf hash on the path (no halves to hold it to): the path's parts are named.
    sql("UPDATE ledger_lognode SET hash = %s WHERE key = %s", saved, key)
    name = next(n for n in bundle["subtrees"] if n.startswith("0/"))
    position = int(name.split("/")[1])
    sql("UPDATE ledger_logleaf SET hash = %s WHERE position = %s", "cd" * 32, position)
    path.write_text(json.dumps(export.bundle(bundle["goal"])))
    assert cli.main([str(path)]) == 1
    out = capsys.readouterr().out
    assert "the event's record or one of the stored subtrees its path is made of (" in out
    assert name in out.split("made of (")[1], out


def test_deleting_every_stored_head_is_found_and_nothing_reads_as_unsealed(world):
    sql("DELETE FROM ledger_treehead")
    code, out = against(world.kept)
    assert code == 1, out
    assert "no signed head is stored: the heads were deleted" in out
    assert f"the kept head (size {world.kept_size}) is not among the stored heads" in out
    assert "the sealer's record" in out and "not sealed yet" not in out


@pytest.mark.parametrize("cut", [False, True], ids=["rewrite", "truncate"])
def test_events_only_an_unkept_head_covered_cannot_be_rewritten_or_cut(world, cut, caplog):
    """Delete the newest head and the leaves above the kept one, edit (or cut)
    what only the deleted head covered, and let the sealer sign with the real key."""
    late = Event.objects.filter(id__gt=LogLeaf.objects.get(position=world.kept_size - 1)
                                .event_id).order_by("id")
    victim = late.first()
    drop_tree_above(world.kept_size)
    if cut:
        sql("DELETE FROM ledger_event WHERE id >= %s", victim.id)
        for goal in Goal.objects.all():
            if Event.objects.filter(goal_id=goal.pk).exists():
                rehash_goal(goal.pk)
            else:  # a goal begun after the kept head: gone with its events
                sql("DELETE FROM ledger_goal WHERE id = %s", pk(goal.pk))
    else:
        sql("UPDATE ledger_event SET actor = %s WHERE id = %s", "agent-mallory", victim.id)
        rehash_goal(victim.goal_id)
    assert ledger("verify")[0] == 0  # every chain is whole again
    heads = TreeHead.objects.count()
    with caplog.at_level(logging.ERROR, logger="ledger.log.sealer_state"):
        code, out, err = ledger("seal")
    assert code == 3 and "ALARM: no head signed" in err, out + err
    assert TreeHead.objects.count() == heads  # never a new head
    assert "ALARM" in caplog.text and "inconsistent" in caplog.text
    assert sealer_state.inconsistency_alarm()  # what a metrics collector reads
    assert ledger("seal")[0] == 3  # and again, until someone acts
    code, out, err = ledger("doctor")  # the alert an operator sees
    assert code != 0 and "ALARM: the sealer signs no head" in out + err, out + err
    code, out = against(world.kept)  # the auditor's old head alone no longer suffices:
    assert code == 1 and "the sealer's record" in out, out  # the record is held to


def test_the_alarm_clears_once_the_log_is_consistent_again(world):
    # The tree's newest subtree (what its root is made of) altered, then put back.
    level, index = merkle.frontier_keys(merkle_store.size())[-1]
    table, column, at = (("ledger_logleaf", "position", index) if level == 0 else
                         ("ledger_lognode", "key", merkle_store.node_key(level, index)))
    saved = merkle_store.fetch([(level, index)])[(level, index)].hex()
    sql(f"UPDATE {table} SET hash = %s WHERE {column} = %s", "cd" * 32, at)
    assert ledger("seal")[0] == 3
    assert "does not extend the checkpoint" in sealer_state.inconsistency_alarm()
    sql(f"UPDATE {table} SET hash = %s WHERE {column} = %s", saved, at)
    GoalFactory()  # something new to sign
    assert ledger("seal")[0] == 0
    assert sealer_state.inconsistency_alarm() is None


def test_a_damaged_sealer_record_is_an_alarm_too(world):
    world.record.write_text("not a note")
    code, _, err = ledger("seal")
    assert code == 3 and "is damaged" in err


def test_a_backup_restored_under_the_record_is_a_rollback(world):
    horizon = json.loads(world.kept.read_text())["horizon"]
    drop_tree_above(world.kept_size)
    sql("DELETE FROM ledger_event WHERE id > %s", horizon)
    code, _, err = ledger("seal")
    assert code == 3 and "fewer than the" in err and "truncated or rolled back" in err



def test_nodes_are_checked_against_the_stored_leaves_not_the_changed_events(world):
    """A changed event is a leaf finding, never a false "stored node" one; a node
    corrupted as well is still named (its check follows the stored leaves)."""
    victim = Event.objects.get(id=LogLeaf.objects.get(position=1).event_id)
    sql("UPDATE ledger_event SET actor = %s WHERE id = %s", "agent-mallory", victim.id)
    code, out = against(world.kept)
    assert code == 1 and "leaf 1: event" in out and "stored node" not in out, out
    key = LogNode.objects.order_by("-key").values_list("key", flat=True).first()
    sql("UPDATE ledger_lognode SET hash = %s WHERE key = %s", "ef" * 32, key)
    code, out = against(world.kept)
    assert f"stored node {key >> 48}/{key & ((1 << 48) - 1)} " in out, out


def test_a_kept_checkpoint_must_carry_this_logs_signature(world, tmp_path):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    newest = TreeHead.objects.order_by("-id").first()
    body = notes.split(newest.checkpoint)[0]
    kept = tmp_path / "kept.note"
    kept.write_text(newest.checkpoint)
    code, out = against(kept)
    assert code == 0, out
    origin = body.split("\n")[0]
    kept.write_text(notes.format_note(body, [notes.sign(body, origin,
                                                        Ed25519PrivateKey.generate())]))
    code, out = against(kept)
    assert code == 1 and "the kept checkpoint carries no valid signature" in out, out
    kept.write_text("not a checkpoint\n")
    code, out = against(kept)
    assert code != 0 and "is not a tree head or a checkpoint" in out, out
