"""The log's checkpoints (C2SP tlog-checkpoint) and a witness that cosigns them
(``wakeledger-verify witness``, C2SP tlog-cosignature v1), over real HTTP: the
witness accepts, cosigns and remembers; the server keeps and serves known
witnesses' cosignatures; a split view and a rollback make the witness stop
with an alarm, cosigning nothing.
"""

import base64
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.db import connection

from ledger.eventstore import triggers
from ledger.log import sealing, signing
from ledger.models import Cosignature, LogLeaf, TreeHead
from tests.factories import GoalFactory
from tests.helpers import issue_agent_token, ledger
from tests.log.test_log_attacks import append_checkpoint, rehash_goal, sql
from tests.log.test_log_tamper_paths import drop_tree_above
from wakeledger_verify import merkle, notes, witness

ROOT = Path(__file__).resolve().parents[2]
NAME = "witness.example.org/auditor"


def log_key() -> str:
    return signing.signer().note_verifier().text()


# ------------------------------------------------------------------ no server


def test_a_checkpoint_is_a_signed_note_the_log_key_opens(db, sealer_record):
    GoalFactory(checkpoints=2)
    head = sealing.seal().head
    opened = notes.open_checkpoint(head.checkpoint, notes.parse_verifier(log_key()))
    assert (opened.checkpoint.size, opened.checkpoint.root.hex()) == (head.size, head.root)
    assert head.checkpoint.startswith("wakeledger.localhost/log\n")
    code, out, _ = ledger("key", "--note")
    assert code == 0 and out.strip() == log_key()
    name, key_hash, key = out.strip().split("+", 2)
    assert name == "wakeledger.localhost/log" and len(key_hash) == 8
    assert base64.b64decode(key)[0] == notes.ED25519 and len(base64.b64decode(key)) == 33
    tampered = head.checkpoint.replace(f"\n{head.size}\n", f"\n{head.size + 1}\n")
    with pytest.raises(notes.NoteError, match="no valid signature"):
        notes.open_checkpoint(tampered, notes.parse_verifier(log_key()))


def test_observe_refuses_a_fork_at_the_same_size_and_a_smaller_tree():
    key = Ed25519PrivateKey.generate()
    log = notes.verifier("log.example/x", key.public_key())

    def note(size: int, root: bytes) -> str:
        body = notes.Checkpoint("log.example/x", size, root).body()
        return notes.format_note(body, [notes.sign(body, "log.example/x", key)])

    leaves = [merkle.leaf_hash(bytes([i])) for i in range(6)]
    tampered = [*leaves[:2], merkle.leaf_hash(b"forged"), *leaves[3:]]
    first = witness.observe(None, note(4, merkle.root_of(leaves[:4])), log, None)
    with pytest.raises(witness.SplitView, match="two checkpoints of 4 leaves"):
        witness.observe(first, note(4, merkle.root_of(leaves[1:5])), log, None)
    with pytest.raises(witness.Rollback, match="ROLLBACK: the log now shows 3 leaves"):
        witness.observe(first, note(3, merkle.root_of(leaves[:3])), log, None)
    frontier, nodes = merkle.Frontier(), {}
    for leaf in leaves:
        nodes.update(frontier.append(leaf))
    proof = merkle.hashes_for(merkle.consistency_ranges(4, 6), lambda keys: nodes)
    later = witness.observe(first, note(6, merkle.root_of(leaves)), log, lambda a, b: proof)
    assert later.size == 6
    with pytest.raises(witness.SplitView, match="does not extend the accepted one"):
        witness.observe(first, note(6, merkle.root_of(tampered)), log, lambda a, b: proof)
    other = notes.verifier("log.example/x", Ed25519PrivateKey.generate().public_key())
    with pytest.raises(notes.NoteError):
        witness.observe(first, note(6, merkle.root_of(leaves)), other, lambda a, b: proof)


# ------------------------------------------------------------------ over HTTP


@pytest.fixture
def served(live_server, sealer_record, settings, tmp_path):
    """A server with a sealed log, an auditor's token for the witness, and the
    witness's key known to the server (WAKELEDGER_WITNESS_KEYS)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from ledger.access import accounts

    goals = [GoalFactory(checkpoints=3), GoalFactory(checkpoints=2)]
    sealing.seal()
    user = get_user_model().objects.create(username="witness-1")
    user.groups.add(Group.objects.get_or_create(name="auditor")[0])
    key = tmp_path / "witness" / "key.pem"
    args = ["--key", str(key), "--name", NAME]
    assert witness.main([*args, "--print-key"]) == 0
    vkey = notes.verifier(NAME, witness.witness_key(key).public_key(),
                          notes.COSIGNATURE_V1).text()
    settings.WAKELEDGER_WITNESS_KEYS = [vkey]
    os.environ[witness.TOKEN_ENV] = accounts.issue_token(user)
    state = tmp_path / "witness" / "state.json"
    yield {"goals": goals, "vkey": vkey, "state": state, "tmp": tmp_path,
           "args": [*args, "--url", live_server.url, "--log-key", log_key(),
                    "--state", str(state), "--once"]}
    os.environ.pop(witness.TOKEN_ENV, None)


def run_witness(served, capsys) -> tuple[int, str]:
    code = witness.main(served["args"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


pytestmark_http = pytest.mark.django_db(transaction=True)


@pytestmark_http
def test_the_witness_cosigns_and_the_server_serves_the_cosigned_checkpoint(served, capsys,
                                                                         tmp_path):
    code, out = run_witness(served, capsys)
    assert code == 0 and "cosigned wakeledger.localhost/log at" in out and "(kept" in out, out
    head = TreeHead.objects.order_by("-id").first()
    assert Cosignature.objects.get().head_id == head.id
    assert stat.S_IMODE(served["state"].stat().st_mode) == 0o600
    assert json.loads(served["state"].read_text())["size"] == head.size
    # The checkpoint as everyone reads it: one note, the log's and the witness's lines.
    from tests.conftest import Api
    answer = Api("reader-1", "auditor").client.get("/api/v1/ledger/checkpoint")
    assert answer["Content-Type"].startswith("text/plain")
    note = answer.content.decode()
    opened = notes.open_checkpoint(note, notes.parse_verifier(log_key()),
                                   [notes.parse_verifier(served["vkey"])])
    assert list(opened.cosigned_by) == [NAME]
    # The log grows: the witness checks the consistency proof and cosigns again.
    append_checkpoint(str(served["goals"][0].pk), "later")
    sealing.seal()
    code, out = run_witness(served, capsys)
    assert code == 0, out
    assert Cosignature.objects.count() == 2
    # A cosigned checkpoint is a kept head for `verify --against`.
    kept = tmp_path / "cosigned.note"
    kept.write_text(Api("reader-1", "auditor").client.get("/api/v1/ledger/checkpoint")
                    .content.decode())
    code, out, err = ledger("verify", "--against", str(kept))
    assert code == 0 and f"cosigned by {NAME}" in out, out + err


@pytestmark_http
def test_the_witness_runs_without_django(served, tmp_path):
    """`python -m wakeledger_verify witness` as an auditor runs it elsewhere: no
    Django settings, nothing of the project but the verifier package."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO")}
    env["PYTHONPATH"] = str(ROOT)
    probe = ("import sys, runpy; sys.argv = ['wakeledger-verify', *sys.argv[1:]]; "
             "from wakeledger_verify import cli; code = cli.main(); "
             "assert 'django' not in sys.modules, 'imported django'; sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", probe, "witness", *served["args"]], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cosigned wakeledger.localhost/log" in done.stdout


@pytestmark_http
def test_a_rollback_stops_the_witness(served, capsys):
    assert run_witness(served, capsys)[0] == 0
    before = TreeHead.objects.order_by("id").first()
    append_checkpoint(str(served["goals"][1].pk), "later")
    sealing.seal()
    assert run_witness(served, capsys)[0] == 0
    # The database as an older backup holds it (the sealer's record would alarm
    # too; here the witness is the one outside who notices).
    triggers.drop(connection)
    sql("DELETE FROM ledger_cosignature")
    drop_tree_above(before.size)
    code, out = run_witness(served, capsys)
    assert code == witness.ALARM, out
    assert "ALARM: ROLLBACK: the log now shows" in out
    assert json.loads(served["state"].read_text())["size"] > before.size  # not forgotten


@pytestmark_http
def test_a_split_view_stops_the_witness(served, capsys, settings):
    """The limit the sealer's record cannot cover: key and record both stolen
    (here: the record switched off). The forger rewrites what the witness saw
    and signs with the real key; the witness refuses to extend it."""
    assert run_witness(served, capsys)[0] == 0
    accepted = json.loads(served["state"].read_text())
    settings.WAKELEDGER_SEALER_STATE_FILE = "off"
    triggers.drop(connection)
    sql("DELETE FROM ledger_cosignature")
    victim = LogLeaf.objects.get(position=accepted["size"] - 2).event_id
    drop_tree_above(accepted["size"] - 2)
    sql("UPDATE ledger_event SET actor = %s WHERE id = %s", "agent-mallory", victim)
    from ledger.models import Event
    rehash_goal(Event.objects.get(id=victim).goal_id)
    GoalFactory()  # so the forged tree is larger than what the witness saw
    assert ledger("seal")[0] == 0  # signed with the real key
    code, out = run_witness(served, capsys)
    assert code == witness.ALARM, out
    assert "ALARM: SPLIT VIEW: the checkpoint of" in out and "does not extend" in out
    assert not Cosignature.objects.exists()


@pytestmark_http
def test_the_server_keeps_only_known_witnesses_valid_cosignatures(served, auditor):
    head = TreeHead.objects.order_by("-id").first()
    body = notes.split(head.checkpoint)[0]
    stranger = notes.cosign(body, "stranger.example/w", Ed25519PrivateKey.generate(), 1)
    answer = auditor.post("ledger/checkpoint", {"checkpoint": head.checkpoint +
                                                stranger.line()})
    assert answer.status_code == 400 and answer.json()["code"] == "cosignature_invalid"
    other = notes.Checkpoint("wakeledger.localhost/log", head.size, b"\1" * 32).body()
    answer = auditor.post("ledger/checkpoint", {"checkpoint": other + "\n" + stranger.line()})
    assert answer.status_code == 404 and answer.json()["code"] == "checkpoint_unknown"
    answer = auditor.post("ledger/checkpoint", {"checkpoint": "not a note"})
    assert answer.status_code == 400 and answer.json()["code"] == "validation_error"
    agent = issue_agent_token("agent-9")
    from rest_framework.test import APIClient
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent}")
    assert client.post("/api/v1/ledger/checkpoint", {"checkpoint": head.checkpoint},
                       format="json").status_code == 403


def test_an_export_carries_the_cosigned_checkpoint_and_the_verifier_checks_it(
        db, sealer_record, settings, tmp_path, capsys):
    from ledger.log import cosigning, export
    from wakeledger_verify import cli

    goal = GoalFactory(checkpoints=2)
    first = sealing.seal().head
    kept = tmp_path / "kept.note"
    kept.write_text(first.checkpoint)
    append_checkpoint(str(goal.pk), "later")
    head = sealing.seal().head
    key = Ed25519PrivateKey.generate()
    vkey = notes.verifier(NAME, key.public_key(), notes.COSIGNATURE_V1).text()
    settings.WAKELEDGER_WITNESS_KEYS = [vkey]
    body = notes.split(head.checkpoint)[0]
    cosigning.add(head.checkpoint + notes.cosign(body, NAME, key, 1_700_000_000).line())
    path = tmp_path / "bundle.json"
    bundle = export.bundle(str(goal.pk), from_sizes=[first.size])
    path.write_text(json.dumps(bundle))
    assert cli.main([str(path), "--witness-key", vkey, "--head", str(kept)]) == 0
    out = capsys.readouterr().out
    assert f"extends the kept head of {first.size} leaves" in out
    assert f"cosigned by {NAME}" in out
    # A witness the bundle's checkpoint lacks, a checkpoint that is not the head.
    other = notes.verifier("other.example/w", Ed25519PrivateKey.generate().public_key(),
                           notes.COSIGNATURE_V1).text()
    assert cli.main([str(path), "--witness-key", other]) == 1
    assert "not cosigned by other.example/w" in capsys.readouterr().out
    path.write_text(json.dumps({**bundle, "checkpoint": first.checkpoint}))
    assert cli.main([str(path)]) == 1
    assert "is not its head" in capsys.readouterr().out
    # A kept checkpoint the log does not extend.
    forged_root = notes.Checkpoint("wakeledger.localhost/log", first.size, b"\2" * 32).body()
    kept.write_text(notes.format_note(forged_root, [notes.sign(
        forged_root, "wakeledger.localhost/log", signing.signer().private_key)]))
    path.write_text(json.dumps(bundle))
    assert cli.main([str(path), "--head", str(kept)]) == 1
    assert "not consistent with the kept head" in capsys.readouterr().out


def test_the_events_api_shows_each_events_id_and_place_in_the_log(agent, db):
    goal_id = agent.start().json()["goal"]["id"]
    before = agent.get(f"goals/{goal_id}/events").json()["events"]
    assert before[0]["position"] is None and isinstance(before[0]["id"], int)
    sealing.seal()
    events = agent.get(f"goals/{goal_id}/events").json()["events"]
    assert [e["position"] for e in events] == [
        LogLeaf.objects.get(event_id=e["id"]).position for e in events]
    event = events[-1]
    proof = agent.get("ledger/proof/inclusion", event=event["id"]).json()
    assert proof["leaf_index"] == event["position"]


@pytest.mark.parametrize("accept", [None, "text/plain", "text/plain; charset=utf-8", "text/*",
                                    "*/*", "application/json;q=0.9, text/plain"])
def test_the_checkpoint_is_served_to_a_client_asking_for_its_own_type(db, sealer_record,
                                                                       auditor, accept):
    GoalFactory(checkpoints=1)
    head = sealing.seal().head
    headers = {"HTTP_ACCEPT": accept} if accept is not None else {}
    answer = auditor.client.get("/api/v1/ledger/checkpoint", **headers)
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"] == "text/plain; charset=utf-8"
    assert answer.content.decode() == head.checkpoint
    assert auditor.client.head("/api/v1/ledger/checkpoint", **headers).status_code == 200


@pytest.mark.parametrize("accept", ["application/json", "text/html", "text/plain;q=0"])
def test_a_checkpoint_asked_for_in_another_type_is_a_406_problem(db, sealer_record, auditor,
                                                                 accept):
    GoalFactory(checkpoints=1)
    sealing.seal()
    answer = auditor.client.get("/api/v1/ledger/checkpoint", HTTP_ACCEPT=accept)
    assert answer.status_code == 406
    assert answer.json()["code"] == "not_acceptable" and "text/plain" in answer.json()["detail"]


@pytest.mark.parametrize("when", [2**63, 2**64 - 1])
def test_a_cosignature_timestamped_past_a_signed_64_bit_integer_is_a_400(
        db, sealer_record, settings, auditor, when):
    GoalFactory(checkpoints=1)
    head = sealing.seal().head
    key = Ed25519PrivateKey.generate()
    settings.WAKELEDGER_WITNESS_KEYS = [notes.verifier(NAME, key.public_key(),
                                                       notes.COSIGNATURE_V1).text()]
    body = notes.split(head.checkpoint)[0]
    answer = auditor.post("ledger/checkpoint", {"checkpoint": head.checkpoint + notes.cosign(
        body, NAME, key, when).line()}, key=f"late-{when}")
    assert answer.status_code == 400, answer.content
    assert answer.json()["code"] == "time_out_of_range" and str(when) in answer.json()["detail"]
    assert not Cosignature.objects.exists()
    latest = notes.cosign(body, NAME, key, 2**63 - 1).line()  # the last time a column holds
    answer = auditor.post("ledger/checkpoint", {"checkpoint": head.checkpoint + latest})
    assert answer.status_code == 200 and Cosignature.objects.get().timestamp == 2**63 - 1


# ------------------------------------------------------------------ the witness as a process


def witness_process(served, *extra: str, once: bool = True, timeout: float = 60,
                    ) -> subprocess.CompletedProcess[str]:
    """`python -m wakeledger_verify witness` as an auditor runs it, against the
    live server (the token comes from the environment the fixture set)."""
    args = [a for a in served["args"] if a != "--once"] + (["--once"] if once else [])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "wakeledger_verify", "witness", *args, *extra],
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.slow
@pytestmark_http
def test_deleted_heads_after_an_accepted_size_are_a_rollback_the_witness_keeps(served):
    done = witness_process(served)
    assert done.returncode == 0, done.stdout + done.stderr
    size = json.loads(served["state"].read_text())["size"]
    triggers.drop(connection)
    sql("DELETE FROM ledger_cosignature")
    sql("DELETE FROM ledger_treehead")  # the log now answers 409 not_sealed
    done = witness_process(served)
    assert done.returncode == witness.ALARM, done.stdout + done.stderr
    assert (f"ALARM: ROLLBACK: the log serves no checkpoint (409 not_sealed) and this witness "
            f"accepted one of {size} leaves") in done.stderr
    # The server hears of it: the accepted checkpoint, which it no longer has.
    assert (f"told the server of the checkpoint of {size} leaves this witness accepted: "
            "HTTP 404 checkpoint_unknown") in done.stderr
    kept = json.loads(served["state"].read_text())
    assert kept["size"] == size and kept["alarm"].startswith("ROLLBACK")
    # Polling on, it stops at once, not retrying as after a network error.
    done = witness_process(served, "--forget-alarm", "--interval", "0.05", once=False)
    assert done.returncode == witness.ALARM and "ROLLBACK" in done.stderr
    # The alarm stays until someone clears it, whatever the log shows next (the
    # leaves were left: the sealer signs the same tree again).
    assert ledger("seal")[0] == 0
    done = witness_process(served)
    assert done.returncode == witness.ALARM, done.stdout + done.stderr
    assert "trusts the log no more" in done.stderr and not Cosignature.objects.exists()


@pytestmark_http
def test_a_deleted_head_the_witness_accepted_is_a_rollback_though_the_tree_extends_it(
        served, capsys):
    assert run_witness(served, capsys)[0] == 0
    size = json.loads(served["state"].read_text())["size"]
    append_checkpoint(str(served["goals"][0].pk), "later")
    sealing.seal()
    triggers.drop(connection)
    sql("DELETE FROM ledger_cosignature")
    sql("DELETE FROM ledger_treehead WHERE size = %s", size)
    code, out = run_witness(served, capsys)
    assert code == witness.ALARM, out
    assert f"ROLLBACK: the log no longer stores the head of {size} leaves" in out


@pytest.mark.slow
@pytestmark_http
def test_a_log_frozen_by_its_alarm_while_accepting_events_is_stale_to_the_witness(
        served, sealer_record):
    done = witness_process(served)
    assert done.returncode == 0, done.stdout + done.stderr
    # The sealer's record damaged: it raises its alarm and signs nothing more,
    # while the API goes on accepting events.
    sealer_record.write_text("not a note")
    append_checkpoint(str(served["goals"][0].pk), "after the freeze")
    with pytest.raises(sealing.LogInconsistent):
        sealing.seal()
    done = witness_process(served)  # events waiting: noted, not yet an alarm
    assert done.returncode == 0, done.stdout + done.stderr
    state = json.loads(served["state"].read_text())
    assert state["waiting_since"] is not None
    cosigned = Cosignature.objects.get().timestamp
    # The witness saw them waiting an hour ago (its default allows 15 minutes).
    served["state"].write_text(json.dumps({**state, "waiting_since":
                                           state["waiting_since"] - 3600}))
    done = witness_process(served)
    assert done.returncode == witness.STALE, done.stdout + done.stderr
    assert "ALARM: STALE: the log accepts events (1 waiting" in done.stderr
    assert f"no checkpoint beyond {state['size']} leaves" in done.stderr
    assert Cosignature.objects.get().timestamp == cosigned  # no fresh cosignature
    assert witness_process(served, "--stale-after", "0").returncode == 0  # switched off
    # The alarm cleared and the log sealing again: the witness cosigns the new size.
    sealer_record.write_text(TreeHead.objects.order_by("-id").first().checkpoint)
    sealing.seal()
    done = witness_process(served)
    assert done.returncode == 0 and "cosigned" in done.stdout, done.stdout + done.stderr
    assert json.loads(served["state"].read_text())["waiting_since"] is None


def test_the_tail_counts_events_accepted_beyond_the_newest_head(db, sealer_record, auditor,
                                                               agent):
    assert auditor.get("ledger/tail").json() == {
        "tree_size": 0, "horizon": 0, "head_timestamp": None, "newest_event": None,
        "unsealed": 0, "oldest_unsealed_at": None}
    goal = GoalFactory(checkpoints=1)
    head = sealing.seal().head
    tail = auditor.get("ledger/tail").json()
    assert (tail["tree_size"], tail["unsealed"], tail["head_timestamp"]) == (
        head.size, 0, head.timestamp)
    append_checkpoint(str(goal.pk), "unsealed")
    tail = auditor.get("ledger/tail").json()
    assert tail["unsealed"] == 1 and tail["newest_event"] > head.horizon
    assert tail["oldest_unsealed_at"].endswith("Z")
    assert agent.get("ledger/tail").status_code == 403  # about the whole log


@pytestmark_http
def test_an_export_right_after_a_seal_takes_the_newest_head_the_witness_cosigned(
        served, capsys, tmp_path):
    from wakeledger_verify import cli

    assert run_witness(served, capsys)[0] == 0
    cosigned = TreeHead.objects.order_by("-id").first()
    goal = str(served["goals"][0].pk)
    append_checkpoint(goal, "later")  # `ledger export` seals it: a head no witness saw yet
    bundle = tmp_path / "bundle.json"
    code, out, err = ledger("export", goal, "-o", str(bundle))
    assert code == 0 and json.loads(bundle.read_text())["head"]["size"] > cosigned.size
    assert cli.main([str(bundle), "--witness-key", served["vkey"]]) == 1
    assert f"`ledger export --witness {NAME}`" in capsys.readouterr().out
    for asked in (served["vkey"], NAME):
        code, out, err = ledger("export", goal, "-o", str(bundle), "--witness", asked)
        assert code == 0, out + err
        assert json.loads(bundle.read_text())["head"]["size"] == cosigned.size
        assert cli.main([str(bundle), "--witness-key", served["vkey"]]) == 0
        assert f"cosigned by {NAME}" in capsys.readouterr().out
    # A stored cosignature that is not the witness's own is not taken for it.
    sql("UPDATE ledger_cosignature SET line = %s", cosigned.checkpoint.split("\n\n")[1])
    code, out, err = ledger("export", goal, "--witness", served["vkey"])
    assert code != 0 and f"no signed head is cosigned by {NAME} yet" in out + err
    code, out, err = ledger("export", goal, "--witness", "not a name")
    assert code != 0 and "--witness:" in out + err
