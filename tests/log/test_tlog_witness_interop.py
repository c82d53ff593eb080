"""C2SP tlog-witness add-checkpoint, both ways, against code that is not ours.

No C2SP witness is installable here (Debian, PyPI and npm have none; Go
modules such as torchwood's litewitness need a newer Go than Debian's), so
tests/log/interop/tlog_witness.go is one written from the spec's text with
Go's golang.org/x/mod/sumdb/note (the log's signature: note.Open) and
sumdb/tlog (consistency proofs: tlog.CheckTree to check them, tlog.ProveTree
to make them). It runs as a witness the sealer pushes to, and as a log of
its own that pushes to ``wakeledger-verify witness --serve``. Built offline
in GOPATH mode with Debian's Go, like tests/log/test_checkpoint_interop.py;
without Go or x/mod this test skips. About 4 s with Go's build cache warm.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.cache import cache
from django.db import connection

from ledger.log import sealing, signing, tlog_witness
from ledger.models import Cosignature
from tests.factories import GoalFactory
from tests.log import gobuild
from wakeledger_verify import notes

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

@pytest.fixture(scope="module")
def go_witness(tmp_path_factory) -> Path:
    return gobuild.build("tlog_witness", tmp_path_factory.mktemp("go"), "tlog")


@pytest.fixture
def sqlite_only():
    if connection.vendor != "sqlite":
        pytest.skip("the interop test runs once, in the SQLite half of the suite")


def test_the_sealer_is_cosigned_by_a_go_witness(go_witness, sqlite_only, sealer_record,
                                                settings, auditor):
    log_key = signing.signer().note_verifier().text()
    process = subprocess.Popen([str(go_witness), "serve", "127.0.0.1:0", log_key,
                                "go.example/witness"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        port, vkey = process.stdout.readline().split()
        settings.WAKELEDGER_TLOG_WITNESSES = [f"http://127.0.0.1:{port} {vkey}"]
        cache.clear()
        GoalFactory(checkpoints=3)
        first = sealing.seal().head
        assert tlog_witness.submit_due() == {"go.example/witness": f"cosigned {first.size}"}
        GoalFactory(checkpoints=2)
        second = sealing.seal().head
        assert tlog_witness.submit_due() == {"go.example/witness":
                                             f"cosigned {second.size}"}
        # The log forgets what the witness holds: old 0, the witness's 409, and
        # again with a proof from the size it named.
        Cosignature.objects.all().delete()
        cache.clear()
        GoalFactory(checkpoints=1)
        third = sealing.seal().head
        assert tlog_witness.submit_due() == {"go.example/witness": f"cosigned {third.size}"}
        served = auditor.get("ledger/checkpoint").content.decode()
        opened = notes.open_checkpoint(served, signing.signer().note_verifier(),
                                       [notes.parse_verifier(vkey)])
        assert opened.checkpoint.size == third.size
        assert "go.example/witness" in opened.cosigned_by
    finally:
        process.terminate()
        _, err = process.communicate(timeout=10)
    assert err.splitlines() == [
        "add-checkpoint old 0 -> 200", f"add-checkpoint old {first.size} -> 200",
        "add-checkpoint old 0 -> 409", f"add-checkpoint old {second.size} -> 200"]


def test_a_go_log_is_cosigned_by_our_witness_and_refused_as_the_spec_says(
        go_witness, sqlite_only, tmp_path):
    skey, vkey = subprocess.run([str(go_witness), "keygen", "go.example/log"],
                                capture_output=True, text=True, check=True,
                                timeout=30).stdout.split()
    command = [sys.executable, "-m", "wakeledger_verify", "witness", "--serve",
               "127.0.0.1:0", "--key", str(tmp_path / "w.pem"), "--name", "ours.example/w",
               "--log-key", vkey, "--state", str(tmp_path / "state.json")]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    try:
        words = server.stdout.readline().split()  # serving add-checkpoint on URL as VKEY
        url, witness_key = words[3].removesuffix("/add-checkpoint"), words[-1]
        done = subprocess.run([str(go_witness), "client", url, skey, witness_key],
                              capture_output=True, text=True, timeout=60, check=False)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    statuses = {step: answer["status"] for step, answer in got.items()}
    assert statuses == {
        "empty_tree_wrong_root": 422, "proof_not_empty_from_zero": 422, "first": 200,
        "stale_old": 409, "extends": 200, "bad_proof": 422, "untrusted_key": 403,
        "unknown_origin": 404, "empty_body": 400, "malformed": 400, "old_above_size": 400,
        "extends_again": 200, "same_size": 200, "same_size_other_root": 422}
    assert (got["stale_old"]["type"], got["stale_old"]["body"]) == ("text/x.tlog.size", "4\n")
    # Go's note.Open, given the log's key and ours, verified every cosignature.
    for step in ("first", "extends", "extends_again", "same_size"):
        assert got[step]["cosigned"] == "go.example/log,ours.example/w", got[step]
