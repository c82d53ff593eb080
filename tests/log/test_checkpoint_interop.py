"""Interop: an independent implementation checks the log's checkpoints and
witnesses' cosignatures. Go's golang.org/x/mod/sumdb/note (Debian's
golang-golang-x-mod-dev, built offline in GOPATH mode with Debian's Go) opens
the signed note the API serves and verifies the log's Ed25519 note signature;
tests/log/interop/checkpoint_verify.go verifies cosignature/v1 lines with Go's
crypto/ed25519 through note.Verifier. `make go` installs both; without them
this test skips.
"""

import json
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.db import connection

from ledger.log import cosigning, sealing, signing
from tests.factories import GoalFactory
from tests.log import gobuild
from wakeledger_verify import notes

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

@pytest.fixture(scope="module")
def go_verifier(tmp_path_factory) -> Path:
    return gobuild.build("checkpoint_verify", tmp_path_factory.mktemp("go"), "note")


def go_check(binary: Path, note: str, tmp: Path, *keys: str) -> tuple[int, dict]:
    path = tmp / "checkpoint.note"
    path.write_text(note, encoding="utf-8")
    done = subprocess.run([str(binary), str(path), *keys], capture_output=True, text=True,
                          timeout=60, check=False)
    return done.returncode, json.loads(done.stdout)


def test_go_sumdb_note_verifies_checkpoints_and_cosignatures(go_verifier, tmp_path, settings,
                                                             auditor):
    if connection.vendor != "sqlite":
        pytest.skip("the interop test runs once, in the SQLite half of the suite")
    GoalFactory(checkpoints=3)
    head = sealing.seal().head
    log_key = signing.signer().note_verifier().text()
    code, seen = go_check(go_verifier, head.checkpoint, tmp_path, log_key)
    assert code == 0, seen
    assert seen["verified"] == ["wakeledger.localhost/log"]
    assert (seen["origin"], int(seen["size"]), seen["root"]) == (
        "wakeledger.localhost/log", head.size, head.root)
    # Two witnesses cosign; the server keeps them and serves one note.
    witnesses = {name: Ed25519PrivateKey.generate() for name in ("w1.example/a", "w2.example/b")}
    vkeys = [notes.verifier(name, key.public_key(), notes.COSIGNATURE_V1).text()
             for name, key in witnesses.items()]
    settings.WAKELEDGER_WITNESS_KEYS = vkeys
    body = notes.split(head.checkpoint)[0]
    for name, key in witnesses.items():
        cosigning.add(head.checkpoint + notes.cosign(body, name, key, 1_700_000_000).line())
    served = auditor.get("ledger/checkpoint").content.decode()
    code, seen = go_check(go_verifier, served, tmp_path, log_key, *vkeys)
    assert code == 0, seen
    assert sorted(seen["verified"]) == ["w1.example/a", "w2.example/b",
                                        "wakeledger.localhost/log"]
    # And Go refuses what it should: a changed root, a forged cosignature.
    forged = served.replace(body.split("\n")[2], "A" * 43 + "=")
    assert go_check(go_verifier, forged, tmp_path, log_key)[0] == 1
    stranger = notes.cosign(body, "w1.example/a", Ed25519PrivateKey.generate(), 1)
    code, seen = go_check(go_verifier, head.checkpoint + stranger.line(), tmp_path, log_key,
                          vkeys[0])
    assert code == 1 and seen["unverified"] == 1, seen  # another key: not w1's
    real = notes.cosign(body, "w1.example/a", witnesses["w1.example/a"], 1_700_000_000)
    bent = notes.Signature(real.name, real.key_hash, real.signature[:8] + bytes(64))
    code, seen = go_check(go_verifier, head.checkpoint + bent.line(), tmp_path, log_key,
                          vkeys[0])
    assert code == 1 and "invalid signature" in seen.get("error", ""), seen
