"""The verifiable log (docs/integrity.md, "The verifiable log: signed tree heads,
proofs, offline exports"). RFC 9162 hashing and proofs, sealing behind a
horizon, signed heads, the API's heads and proofs, and exports checked by
``wakeledger-verify``. The attacks on the database are in test_log_attacks.py."""

import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.db import connection
from django_q.models import Schedule

from ledger.domain import RecordCheckpoint
from ledger.eventstore import store
from ledger.log import merkle_store, sealing, signing
from ledger.models import Event, LogLeaf, LogNode, SigningKey, TreeHead
from scheduling import sealing as scheduled
from tests.factories import GoalFactory, proof_of
from tests.helpers import ledger, started, transaction_held_open
from wakeledger_verify import bundle, cli, heads, merkle, records

REPO = Path(__file__).resolve().parents[2]


def append_checkpoint(goal_id: str, step: str = "meanwhile") -> None:
    state = store.load(goal_id)
    store.execute(goal_id, RecordCheckpoint(current_step=step, progress_pct=state.progress_pct,
                                            proof=proof_of(state)), actor="agent-1")


def naive_root(leaves: list[bytes]) -> bytes:
    """MTH straight from RFC 9162 2.1.1, recursively: what the incremental tree must equal."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = merkle.split(len(leaves))
    return merkle.node_hash(naive_root(leaves[:k]), naive_root(leaves[k:]))


def recomputed_leaves() -> list[bytes]:
    """Every event's leaf, recomputed from its row, in tree order."""
    order = list(LogLeaf.objects.order_by("position").values_list("position", "event_id"))
    rows = merkle_store.event_rows(e for _, e in order)
    return [merkle_store.leaf(merkle_store.record(p, rows[e])) for p, e in order]


# ------------------------------------------------------------------ the tree itself


def test_the_tree_is_rfc_9162s_on_its_test_vectors():
    """The leaves of the RFC 6962 / certificate-transparency-go test vectors and
    the roots published with them."""
    inputs = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657",
              "606162636465666768696a6b6c6d6e6f"]
    leaves = [merkle.leaf_hash(bytes.fromhex(i)) for i in inputs]
    assert merkle.root_of(leaves[:1]).hex() == (
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d")
    assert merkle.root_of(leaves).hex() == (
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328")
    assert merkle.root_of([]) == hashlib.sha256(b"").digest()


def test_every_inclusion_and_consistency_proof_up_to_33_leaves_verifies_and_wrong_ones_fail():
    leaves = [merkle.leaf_hash(bytes([i])) for i in range(33)]
    nodes: dict = {}
    frontier = merkle.Frontier()
    for leaf in leaves:
        nodes.update(frontier.append(leaf))

    def fetch(keys):
        return {k: nodes[k] for k in keys}

    for n in range(1, 34):
        root = naive_root(leaves[:n])
        assert frontier_root(n, nodes) == root
        for i in range(n):
            path = merkle.hashes_for(merkle.inclusion_ranges(i, n), fetch)
            assert merkle.root_from_inclusion(i, n, leaves[i], path) == root
            if n > 1:  # another leaf, or the path of another position, does not lead there
                assert merkle.root_from_inclusion(i, n, leaves[(i + 1) % n], path) != root
        for m in range(1, n + 1):
            proof = merkle.hashes_for(merkle.consistency_ranges(m, n), fetch)
            assert merkle.consistent(m, naive_root(leaves[:m]), n, root, proof)
            if m < n:
                other = naive_root([leaves[1], *leaves[1:m]])
                assert not merkle.consistent(m, other, n, root, proof)
                assert not merkle.consistent(m, naive_root(leaves[:m]), n, root, proof[:-1])


def frontier_root(size: int, nodes: dict) -> bytes:
    keys = merkle.frontier_keys(size)
    return merkle.Frontier(size, [nodes[k] for k in keys]).root()


def test_a_leaf_is_the_events_whole_record_domain_separated():
    record = records.leaf_record(3, 7, "g", 1, "goal.started", {"b": 1, "a": "ü"}, "agent-1",
                                 "2026-12-02T09:00:00.000000Z", "key-1", "0" * 64, "f" * 64)
    encoded = records.leaf_bytes(record)
    assert encoded.startswith(b"wakeledger.event.v1:{")
    assert '"data":{"a":"ü","b":1}'.encode() in encoded
    assert b'"idempotency_key":"key-1"' in encoded and b'"position":3' in encoded
    with pytest.raises(ValueError, match="missing idempotency_key"):
        records.leaf_bytes({k: v for k, v in record.items() if k != "idempotency_key"})


# ------------------------------------------------------------------ sealing


@pytest.mark.django_db
def test_seal_puts_every_event_in_the_tree_in_id_order_and_signs_a_head():
    GoalFactory(checkpoints=3)
    GoalFactory(checkpoints=2, finish="completed")
    assert LogLeaf.objects.count() == 0  # appending never touches the tree

    result = sealing.seal()

    ids = list(Event.objects.order_by("id").values_list("id", flat=True))
    assert result.appended == len(ids) == result.size
    assert list(LogLeaf.objects.order_by("position").values_list("event_id", flat=True)) == ids
    head = result.head
    assert head.size == len(ids) and head.horizon == ids[-1]
    assert head.root == naive_root(recomputed_leaves()).hex()
    key = signing.signer()
    assert head.key_id == key.key_id and heads.signature_valid(head.as_dict(),
                                                               key.private_key.public_key())
    assert SigningKey.objects.get(key_id=key.key_id).public_key == key.public_pem

    # Nothing new: no new head. New events: a head that extends the first.
    assert sealing.seal().head is None and TreeHead.objects.count() == 1
    GoalFactory(checkpoints=1)
    second = sealing.seal().head
    assert second.size > head.size and second.root == naive_root(recomputed_leaves()).hex()
    proof = [bytes.fromhex(h) for h in merkle_store.consistency(head.size, second.size)]
    assert merkle.consistent(head.size, bytes.fromhex(head.root), second.size,
                             bytes.fromhex(second.root), proof)


@pytest.mark.django_db
def test_sealing_in_small_batches_builds_the_same_tree():
    for _ in range(3):
        GoalFactory(checkpoints=4)
    result = sealing.seal(batch=3)
    assert result.size == Event.objects.count()
    assert result.head.root == naive_root(recomputed_leaves()).hex()
    # Every complete subtree is stored once: n leaves have n - popcount(n) nodes above them.
    assert LogNode.objects.count() == result.size - bin(result.size).count("1")


@pytest.mark.django_db(transaction=True)
def test_the_seal_waits_for_an_append_in_flight_and_then_includes_it(lock_waits):
    """The horizon: an event inserted by a transaction still open when the seal
    starts is sealed once it commits, never skipped (PostgreSQL: the table
    lock waits for it; SQLite: the write lock does)."""
    goal = GoalFactory(checkpoints=1)
    with transaction_held_open(lambda: append_checkpoint(str(goal.pk), "in flight")):
        sealer = started(sealing.seal)
        lock_waits.wait()  # the seal is queued behind the open append
        assert not sealer.done.is_set(), "the seal must wait for the append in flight"
    sealed = sealer.result()
    assert sealed.size == Event.objects.count() == goal.version + 1
    assert LogLeaf.objects.filter(event_id=Event.objects.latest("id").id).exists()


@pytest.mark.django_db(transaction=True)
def test_an_id_that_commits_after_a_larger_one_is_never_skipped(lock_waits):
    """PostgreSQL hands out ids at insert, not at commit: event n can commit
    after event n + 1. A seal that moved its mark past n + 1 would skip n for
    good (Eventuous#222); the horizon's table lock waits for n instead."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has one writer at a time: ids commit in order")
    slow, fast = GoalFactory(), GoalFactory()
    with transaction_held_open(lambda: append_checkpoint(str(slow.pk), "takes its time")):
        append_checkpoint(str(fast.pk), "commits first")  # a larger id, committed now
        sealer = started(sealing.seal)
        lock_waits.wait()  # the seal's table lock waits for the smaller id
        assert not sealer.done.is_set(), "the seal must wait for the smaller id still in flight"
    sealed = sealer.result()
    late = Event.objects.get(goal=slow, seq=2)
    early = Event.objects.get(goal=fast, seq=2)
    assert late.id < early.id
    positions = dict(LogLeaf.objects.values_list("event_id", "position"))
    assert positions[late.id] < positions[early.id]  # both in, in id order
    assert sealed.size == Event.objects.count()


@pytest.mark.django_db(transaction=True)
def test_behind_an_append_stuck_past_the_lock_timeout_the_seal_gives_up(caplog):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's seal waits for its write lock like every writer")
    goal = GoalFactory()
    with transaction_held_open(lambda: append_checkpoint(str(goal.pk), "stuck")):
        with pytest.raises(sealing.HorizonBusy, match="could not lock ledger_event within 1s"):
            sealing.seal()
        assert scheduled.seal_log() == -1 and "seal skipped" in caplog.text
        assert LogLeaf.objects.count() == 0 and TreeHead.objects.count() == 0
    assert sealing.seal().size == Event.objects.count()


@pytest.mark.django_db
def test_the_signing_key_is_made_once_owner_only_with_a_key_id(tmp_path):
    path = tmp_path / "var" / "signing_key.pem"
    first = signing.signer(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert first.key_id.startswith("ed25519:") and len(first.key_id) == len("ed25519:") + 16
    again = signing.signer(path)
    assert again.key_id == first.key_id and again.public_pem == first.public_pem


@pytest.mark.django_db
def test_a_rotated_key_signs_new_heads_and_old_heads_stay_checkable(settings, tmp_path):
    GoalFactory()
    old = sealing.seal().head
    settings.WAKELEDGER_SIGNING_KEY_FILE = tmp_path / "rotated.pem"
    GoalFactory()
    new = sealing.seal().head
    assert new.key_id != old.key_id
    keys = dict(SigningKey.objects.values_list("key_id", "public_key"))
    for head in (old, new):
        assert heads.signature_valid(head.as_dict(), heads.load_public_key(keys[head.key_id]))


@pytest.mark.django_db
def test_the_seal_schedule_exists_after_migrate_and_its_task_seals(settings):
    [schedule] = Schedule.objects.filter(name=scheduled.SEAL_NAME)
    assert schedule.func == scheduled.SEAL and schedule.minutes == 1 and schedule.repeats == -1
    GoalFactory()
    assert scheduled.seal_log() == Event.objects.count()
    assert TreeHead.objects.count() == 1


@pytest.mark.django_db
def test_the_witness_file_gets_every_new_head(settings, tmp_path):
    settings.WAKELEDGER_HEAD_WITNESS_FILE = str(tmp_path / "witness.jsonl")
    GoalFactory()
    first = sealing.seal().head
    GoalFactory()
    second = sealing.seal().head
    lines = [json.loads(line) for line in (tmp_path / "witness.jsonl").read_text().splitlines()]
    assert lines == [first.as_dict(), second.as_dict()]


@pytest.mark.django_db
def test_ledger_seal_head_and_key_commands():
    code, out, _ = ledger("head")
    assert code != 0
    GoalFactory()
    code, out, _ = ledger("seal")
    assert code == 0 and "signed head: size" in out
    code, out, _ = ledger("seal")
    assert code == 0 and "as the newest head says" in out
    code, out, _ = ledger("head")
    head = json.loads(out)
    assert head == TreeHead.objects.get().as_dict()
    code, out, err = ledger("key")
    assert out.startswith("-----BEGIN PUBLIC KEY-----")  # clean PEM: `ledger key > k.pem`
    assert f"key id: {head['key_id']}" in err


# ------------------------------------------------------------------ the API


@pytest.fixture
def two_agents_sealed(agent, other_agent):
    mine = agent.start().json()["goal"]["id"]
    theirs = other_agent.start(goal_key="other").json()["goal"]["id"]
    sealing.seal()
    return mine, theirs


def test_head_is_a_problem_before_the_first_seal_and_the_signed_head_after(agent):
    answer = agent.get("ledger/head")
    assert answer.status_code == 409 and answer.json()["code"] == "not_sealed"
    agent.start()
    head = sealing.seal().head
    body = agent.get("ledger/head").json()
    assert body == {**head.as_dict(), "public_key": signing.signer().public_pem}
    key = heads.load_public_key(body["public_key"])
    assert heads.signature_valid(body, key)


def test_heads_are_listed_newest_first_page_by_page(auditor, agent):
    for n in range(3):
        agent.start(goal_key=f"g{n}", workspace=f"/srv/repos/g{n}")
        sealing.seal()
    first = auditor.get("ledger/heads", limit=2).json()
    sizes = [h["size"] for h in first["heads"]]
    assert sizes == sorted(sizes, reverse=True) and len(sizes) == 2
    rest = auditor.get("ledger/heads", limit=2, before=first["next_before"]).json()
    assert len(rest["heads"]) == 1 and rest["next_before"] is None
    bad = auditor.get("ledger/heads", limit=0)
    assert bad.status_code == 400 and bad.json()["code"] == "validation_error"


def test_an_inclusion_proof_verifies_against_the_signed_head(agent, two_agents_sealed):
    mine, _ = two_agents_sealed
    event = Event.objects.filter(goal_id=mine).order_by("seq").last()
    body = agent.get("ledger/proof/inclusion", event=event.id).json()
    head = agent.get("ledger/head").json()
    assert body["tree_size"] == head["size"] and body["record"]["id"] == event.id
    leaf = records.record_leaf_hash(body["record"])
    assert leaf.hex() == body["leaf_hash"]
    path = [bytes.fromhex(h) for h in body["audit_path"]]
    assert merkle.root_from_inclusion(body["leaf_index"], head["size"], leaf, path).hex() == \
        head["root"]


def test_an_agent_gets_no_proof_for_another_agents_event(agent, auditor, two_agents_sealed):
    _, theirs = two_agents_sealed
    event = Event.objects.filter(goal_id=theirs).first()
    answer = agent.get("ledger/proof/inclusion", event=event.id)
    assert answer.status_code == 404 and answer.json()["code"] == "not_found"
    assert auditor.get("ledger/proof/inclusion", event=event.id).status_code == 200


@pytest.mark.parametrize("params, status, code", [
    ({}, 400, "validation_error"),
    ({"event": "x"}, 400, "validation_error"),
    ({"event": 0}, 400, "validation_error"),
    ({"event": 10**9}, 404, "not_found"),
    ({"event": 1, "size": 10**6}, 400, "validation_error"),
    ({"event": 1, "extra": 1}, 400, "validation_error"),
])
def test_bad_inclusion_queries_are_problems(auditor, two_agents_sealed, params, status, code):
    if params.get("event") == 1:
        params = {**params, "event": Event.objects.order_by("id").first().id}
    answer = auditor.get("ledger/proof/inclusion", **params)
    assert answer.status_code == status and answer.json()["code"] == code
    assert answer["Content-Type"] == "application/problem+json"


def test_an_event_not_yet_sealed_has_no_proof_yet(agent, auditor, two_agents_sealed):
    mine, _ = two_agents_sealed
    state = store.load(mine)
    store.execute(mine, RecordCheckpoint(current_step="later", progress_pct=1,
                                         proof=proof_of(state)), actor="agent-1")
    newest = Event.objects.latest("id")
    answer = auditor.get("ledger/proof/inclusion", event=newest.id)
    assert answer.status_code == 409 and answer.json()["code"] == "not_sealed"


def test_a_consistency_proof_links_two_heads(auditor, agent, operator):
    agent.start(goal_key="a", workspace="/srv/repos/a")
    first = sealing.seal().head
    agent.start(goal_key="b", workspace="/srv/repos/b")
    second = sealing.seal().head
    body = auditor.get("ledger/proof/consistency", **{"from": first.size}).json()
    assert (body["from"], body["to"]) == (first.size, second.size)
    assert (body["from_root"], body["to_root"]) == (first.root, second.root)
    proof = [bytes.fromhex(h) for h in body["proof"]]
    assert merkle.consistent(first.size, bytes.fromhex(first.root), second.size,
                             bytes.fromhex(second.root), proof)
    assert operator.get("ledger/proof/consistency", **{"from": 1}).status_code == 200
    assert agent.get("ledger/proof/consistency", **{"from": 1}).status_code == 403
    for params in ({}, {"from": 0}, {"from": second.size + 1}, {"from": 2, "to": 1},
                   {"from": 1, "to": second.size + 1}):
        answer = auditor.get("ledger/proof/consistency", **params)
        assert answer.status_code == 400 and answer.json()["code"] == "validation_error", params


# ------------------------------------------------------------------ export and the verifier


@pytest.fixture
def exported(tmp_path, db):
    goal = GoalFactory(checkpoints=4, finish="completed")
    GoalFactory(checkpoints=2)
    sealing.seal()
    kept = TreeHead.objects.get().as_dict()
    GoalFactory(checkpoints=1)  # the log goes on after the head the auditor kept
    path = tmp_path / "bundle.json"
    code, out, _ = ledger("export", str(goal.pk), "-o", str(path))
    assert code == 0 and f"wrote {path}" in out
    (tmp_path / "kept.json").write_text(json.dumps(kept))
    (tmp_path / "key.pem").write_text(signing.signer().public_pem)
    return goal, path, tmp_path


def verify(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    saved, sys.stdout = sys.stdout, out
    try:
        code = cli.main(list(args))
    finally:
        sys.stdout = saved
    return code, out.getvalue().strip()


def test_an_export_verifies_offline_pinned_and_against_a_kept_head(exported):
    goal, path, tmp = exported
    data = json.loads(path.read_text())
    assert [e["seq"] for e in data["events"]] == list(range(1, goal.version + 1))
    assert data["head"] == TreeHead.objects.order_by("-id").first().as_dict()
    code, out = verify(str(path), "--key", str(tmp / "key.pem"), "--head", str(tmp / "kept.json"))
    assert code == 0, out
    assert out.startswith(f"valid: goal {goal.pk}, {goal.version} event(s)")
    assert "extends the kept head" in out and "pass --key" not in out
    code, out = verify(str(path), "--json")
    assert code == 0 and json.loads(out)["valid"] is True and not json.loads(out)["key_pinned"]


def rehash(events: list[dict]) -> None:
    """What a forger does to keep an edited chain sound."""
    previous = records.GENESIS
    for event in events:
        event["prev_hash"] = previous
        event["hash"] = previous = records.chain_hash(event)


def _edit_data(data):
    data["events"][2]["data"]["forged"] = True


def _edit_and_rehash(data):
    data["events"][2]["actor"] = "mallory"
    rehash(data["events"])


def _rewrite_key(data):
    data["events"][1]["idempotency_key"] = "forged"


def _drop_middle(data):
    del data["events"][2]


def _reorder(data):
    events = data["events"]
    events[1], events[2] = events[2], events[1]
    events[1]["seq"], events[2]["seq"] = 2, 3
    rehash(events)


def _forge_root(data):
    data["head"]["root"] = "ab" * 32


def _insert_forged(data):
    forged = {**data["events"][-1], "seq": len(data["events"]) + 1, "kind": "goal.completed",
              "id": data["events"][-1]["id"] + 1, "position": data["events"][-1]["position"] + 1}
    forged["prev_hash"] = data["events"][-1]["hash"]
    forged["hash"] = records.chain_hash(forged)
    data["events"].append(forged)


def _move_position(data):
    data["events"][1]["position"] += 1


@pytest.mark.parametrize("edit, failure", [
    (_edit_data, "event 3: hash does not match the event's content"),
    (_edit_and_rehash, "event 3: inclusion proof does not match root"),
    (_rewrite_key, "event 2: inclusion proof does not match root"),
    (_drop_middle, "event 3: has seq 4"),
    (_reorder, "event 2: inclusion proof does not match root"),
    (_forge_root, "signature invalid for key"),
    (_insert_forged, "inclusion proof does not match root"),
    (_move_position, "event 2: inclusion proof does not match root"),
])
def test_an_edited_export_is_rejected_naming_the_first_failure(exported, edit, failure):
    _, path, tmp = exported
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    code, out = verify(str(path), "--key", str(tmp / "key.pem"))
    assert code == 1 and out.startswith("INVALID: ") and failure in out, out


def test_an_export_resigned_with_another_key_fails_against_the_pinned_key(exported):
    _, path, tmp = exported
    data = json.loads(path.read_text())
    data["events"][0]["actor"] = "mallory"
    rehash(data["events"])
    # The forger rebuilds the whole tree over their edit and signs it with their key.
    forger = signing.signer(tmp / "forger.pem")
    leaves = [records.record_leaf_hash(e) for e in data["events"]]
    data["head"] = {"size": len(leaves), "root": merkle.root_of(leaves).hex(),
                    "timestamp": data["head"]["timestamp"], "key_id": forger.key_id,
                    "horizon": data["head"]["horizon"]}
    data["head"]["signature"] = forger.sign(data["head"])
    for i, event in enumerate(data["events"]):
        event["position"] = i
    nodes: dict = {}
    frontier = merkle.Frontier()
    for leaf in leaves:
        nodes.update(frontier.append(leaf))
    data["subtrees"] = {merkle.subtree_name(k): h.hex() for k, h in nodes.items()}
    data["public_keys"] = {forger.key_id: forger.public_pem}
    data["checkpoint"] = None  # the real key's checkpoint would give the forgery away
    path.write_text(json.dumps(data))

    code, out = verify(str(path))  # unpinned, it is internally consistent …
    assert code == 0 and "pass --key to pin it" in out
    code, out = verify(str(path), "--key", str(tmp / "key.pem"))  # … but not the server's
    assert code == 1 and f"is signed by key {forger.key_id}, not by the given key" in out
    code, out = verify(str(path), "--head", str(tmp / "kept.json"))  # nor the kept head's
    assert code == 1, out


def test_a_kept_head_the_export_does_not_extend_is_reported(exported):
    _, path, tmp = exported
    kept = json.loads((tmp / "kept.json").read_text())
    data = json.loads(path.read_text())
    proof = data["consistency"][str(kept["size"])]
    data["consistency"][str(kept["size"])] = list(reversed(proof))
    path.write_text(json.dumps(data))
    code, out = verify(str(path), "--key", str(tmp / "key.pem"), "--head", str(tmp / "kept.json"))
    assert code == 1 and "not consistent with the kept head" in out


@pytest.mark.parametrize("text, failure", [
    ("not json", "is not JSON"),
    ("[]", "the bundle is not a JSON object"),
    ('{"format": "other"}', "the bundle's format is 'other'"),
    ('{"format": "wakeledger-export/1", "head": {}}', "the head has no size"),
])
def test_a_malformed_bundle_is_a_failure_not_a_traceback(tmp_path, text, failure):
    path = tmp_path / "bundle.json"
    path.write_text(text)
    code, out = verify(str(path))
    assert code == 1 and failure in out, out


def test_a_bundle_short_of_a_subtree_its_proofs_need_is_rejected(exported):
    _, path, _ = exported
    data = json.loads(path.read_text())
    del data["subtrees"][sorted(data["subtrees"])[0]]
    with pytest.raises(bundle.Failure, match="inclusion proof does not match root "
                                             r"\(the bundle lacks subtree"):
        bundle.check(data)
    del data["subtrees"]
    with pytest.raises(bundle.Failure, match="the bundle has no subtrees"):
        bundle.check(data)


def test_the_multi_proof_holds_each_subtree_once_and_only_those_needed(exported):
    _, path, _ = exported
    data = json.loads(path.read_text())
    size = data["head"]["size"]
    needed = {merkle.subtree_name(k) for e in data["events"]
              for a, b in merkle.inclusion_ranges(e["position"], size)
              for k in merkle.range_keys(a, b)}
    assert set(data["subtrees"]) == needed


BLOCKER = """
import importlib.abc, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"django", "rest_framework", "ledger", "api", "scheduling",
                                  "django_q", "psycopg"}:
            raise ImportError("the verifier imported " + name)
sys.meta_path.insert(0, Refuse())
sys.argv = ["wakeledger-verify", *sys.argv[1:]]
from wakeledger_verify.cli import main
code = main()
assert not {m for m in sys.modules if m.split(".")[0] in {"django", "ledger", "api"}}
sys.exit(code)
"""


def test_the_verifier_runs_isolated_and_imports_nothing_of_the_server(exported):
    _, path, tmp = exported
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)}
    # -I: no PYTHONPATH, no user site, no current directory; the package is
    # found as installed (editable), like any console script's.
    done = subprocess.run([sys.executable, "-I", "-c", BLOCKER, str(path), "--key",
                           str(tmp / "key.pem")], capture_output=True, text=True, env=env,
                          cwd=tmp, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("valid: goal ")
    script = Path(sys.executable).with_name("wakeledger-verify")
    done = subprocess.run([str(script), str(path)], capture_output=True, text=True,
                          timeout=60, check=False, cwd=tmp, env=env)
    assert done.returncode == 0 and "valid" in done.stdout, done.stderr


def test_a_clean_virtualenv_with_only_cryptography_verifies_an_export(exported):
    """A virtualenv without pip, Django or the server: only cryptography (and
    the cffi it needs) and the verifier package, as an auditor's machine would have."""
    _, path, tmp = exported
    env_dir = tmp / "auditor-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True,
                   timeout=120)
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    import cffi
    import cryptography

    here = Path(cryptography.__file__).resolve().parent.parent
    for name in ("cryptography", "cffi", "pycparser"):
        (site / name).symlink_to(here / name)
    for backend in here.glob("_cffi_backend*"):
        (site / backend.name).symlink_to(backend)
    (site / "wakeledger_verify").symlink_to(REPO / "wakeledger_verify")
    assert cffi  # imported only to be sure it is where cryptography's copy comes from
    python = env_dir / "bin" / "python"
    done = subprocess.run([str(python), "-I", "-c", "import django"], capture_output=True,
                          timeout=60, check=False)
    assert done.returncode != 0  # nothing of the server's world is there
    done = subprocess.run([str(python), "-I", "-m", "wakeledger_verify", str(path), "--key",
                           str(tmp / "key.pem"), "--head", str(tmp / "kept.json")],
                          capture_output=True, text=True, timeout=60, check=False, cwd=tmp)
    assert done.returncode == 0, done.stderr + done.stdout
    assert done.stdout.startswith("valid: goal ")


def test_export_refuses_a_goal_before_any_head_and_an_unknown_goal(db):
    goal = GoalFactory()
    code, _, err = ledger("export", str(goal.pk), "--no-seal")
    assert code != 0 and "no signed head yet" in err
    code, _, err = ledger("export", "00000000-0000-0000-0000-000000000000")
    assert code != 0 and "no such goal" in err


def test_export_to_stdout_is_the_bundle(db):
    goal = GoalFactory(checkpoints=1)
    code, out, _ = ledger("export", str(goal.pk))
    data = json.loads(out)
    assert code == 0 and bundle.check(data).events == goal.version


def test_the_admin_timeline_offers_the_verifiable_export_as_a_download(db):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.test import Client

    user = get_user_model().objects.create_user("audrey", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name="auditor"))
    client = Client()
    client.force_login(user)
    goal = GoalFactory(checkpoints=2)
    url = f"/admin/ledger/goal/{goal.pk}/export/"
    assert url in client.get(f"/admin/ledger/goal/{goal.pk}/timeline/").content.decode()
    before = client.get(url)  # nothing sealed yet: back to the timeline, with why
    assert before.status_code == 302 and before.url.endswith("/timeline/")
    sealing.seal()
    answer = client.get(url)
    assert answer.status_code == 200
    assert answer["Content-Disposition"] == (
        f'attachment; filename="wakeledger-export-{goal.pk}.json"')
    assert bundle.check(json.loads(answer.content)).events == goal.version
    assert Client().get(url).status_code == 302  # the login page, for no one logged in


@pytest.mark.slow  # real processes or many examples: not in make test-quick
def test_the_verifiable_log_benchmark_runs_and_reports_its_rows(tmp_path):
    """bench/verifiable.py on a tiny log (the figures are make bench's)."""
    out = tmp_path / "rows.json"
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    done = subprocess.run([sys.executable, str(REPO / "bench" / "verifiable.py"), "--events",
                           "400", "--goal-events", "60", "--reps", "5", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, check=False, env=env,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(out.read_text())}
    assert rows["bundle size, 60-event goal"]["value"] > 0
    assert rows["wakeledger-verify (chain + proof per event)"]["value"] > 0


def test_a_webhook_witness_receives_each_new_head(settings, db):
    from http.server import BaseHTTPRequestHandler, HTTPServer

    received: list = []

    class Witness(BaseHTTPRequestHandler):
        def do_POST(self):
            length = int(self.headers["Content-Length"])
            received.append((self.headers["Idempotency-Key"], json.loads(self.rfile.read(length))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Witness)
    thread = threading.Thread(target=server.handle_request)
    thread.start()
    settings.WAKELEDGER_HEAD_WITNESS_URL = f"http://127.0.0.1:{server.server_port}/heads"
    GoalFactory()
    code, out, _ = ledger("seal")
    thread.join(10)
    server.server_close()
    head = TreeHead.objects.get()
    assert code == 0 and "witness took the head" in out
    assert received == [(f"tree-head-{head.size}", head.as_dict())]
    # A witness that is down costs a log line, never the seal.
    settings.WAKELEDGER_HEAD_WITNESS_URL = f"http://127.0.0.1:{server.server_port}/heads"
    GoalFactory()
    assert scheduled.seal_log() == Event.objects.count()
    assert TreeHead.objects.count() == 2


def test_after_a_rotation_both_keys_pin_a_bundle_and_a_kept_head(exported, settings):
    goal, path, tmp = exported
    settings.WAKELEDGER_SIGNING_KEY_FILE = tmp / "rotated.pem"
    GoalFactory()
    new_key = tmp / "new.pem"
    new_key.write_text(signing.signer().public_pem)
    code, _, _ = ledger("export", str(goal.pk), "-o", str(path))
    assert code == 0 and json.loads(path.read_text())["head"]["key_id"] == signing.signer().key_id
    kept = ("--head", str(tmp / "kept.json"))  # signed by the old key
    code, out = verify(str(path), "--key", str(new_key), *kept)
    assert code == 1 and "the kept head is signed by key" in out
    code, out = verify(str(path), "--key", str(new_key), "--key", str(tmp / "key.pem"), *kept)
    assert code == 0 and "extends the kept head" in out, out
