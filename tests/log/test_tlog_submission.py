"""The log's side of C2SP tlog-witness: each new checkpoint goes to the
configured witnesses by add-checkpoint after the seal commits, a 409 is
followed with a proof from the size the witness names, a witness that is
down is retried with backoff, and the cosignatures returned are kept and
served with the checkpoint. The witness here is ``wakeledger-verify witness
--serve`` on a real socket; tests/log/test_tlog_witness_interop.py runs the
same against a witness written in Go.
"""

import io
import json
import socket
import threading
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.cache import cache
from django.core.management import call_command
from django_q.models import Schedule, Task
from django_q.tasks import async_task

from ledger.log import cosigning, sealing, signing, tlog_witness
from ledger.models import Cosignature
from tests.factories import GoalFactory
from wakeledger_verify import add_checkpoint, notes

pytestmark = pytest.mark.django_db

NAME = "witness.example/w1"


class Recording(add_checkpoint.Witness):
    """The witness, with the statuses it answered kept for the test."""

    answered: list[int]

    def add_checkpoint(self, raw: bytes) -> str:
        try:
            lines = super().add_checkpoint(raw)
        except add_checkpoint.RequestError as error:
            self.answered.append(error.status)
            raise
        self.answered.append(200)
        return lines


@pytest.fixture(params=["ed25519"])
def witness(request, sealer_record, settings, tmp_path):
    cache.clear()
    key = add_checkpoint.load_key(tmp_path / "witness.pem", request.param == "ml-dsa-44")
    log = signing.signer().note_verifier()
    served = Recording(NAME, key, [log], tmp_path / "witness-state.json")
    served.answered = []
    server = add_checkpoint.ThreadingHTTPServer(("127.0.0.1", 0),
                                                add_checkpoint.handler(served, "/w"))
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/w"
    settings.WAKELEDGER_TLOG_WITNESSES = [f"{url} {served.verifier().text()}"]
    yield served
    server.shutdown()
    server.server_close()
    cache.clear()


def test_a_seal_writes_the_submission_row_only_when_witnesses_are_configured(
        sealer_record, settings):
    settings.WAKELEDGER_TLOG_WITNESSES = []
    GoalFactory(checkpoints=1)
    sealing.seal()
    assert not Schedule.objects.filter(name=tlog_witness.SCHEDULE_NAME).exists()
    settings.WAKELEDGER_TLOG_WITNESSES = ["http://127.0.0.1:9 " + notes.verifier(
        NAME, Ed25519PrivateKey.generate().public_key(), notes.COSIGNATURE_V1).text()]
    GoalFactory(checkpoints=1)
    sealing.seal()
    row = Schedule.objects.get(name=tlog_witness.SCHEDULE_NAME)
    assert (row.func, row.schedule_type) == (tlog_witness.TASK, Schedule.ONCE)
    assert sealing.seal().head is None  # nothing new: no second submission
    assert Schedule.objects.filter(name=tlog_witness.SCHEDULE_NAME).count() == 1


@pytest.mark.parametrize("witness", ["ed25519", "ml-dsa-44"], indirect=True)
def test_each_new_checkpoint_is_cosigned_and_served(witness, auditor):
    GoalFactory(checkpoints=3)
    first = sealing.seal().head
    # The seal's row, run as django-q2 runs it: by its dotted name.
    row = Schedule.objects.get(name=tlog_witness.SCHEDULE_NAME)
    task = Task.objects.get(id=async_task(row.func, sync=True))
    assert task.success and task.result == {NAME: f"cosigned {first.size}"}
    GoalFactory(checkpoints=2)
    second = sealing.seal().head
    assert tlog_witness.submit_due() == {NAME: f"cosigned {second.size}"}
    assert tlog_witness.submit_due() == {NAME: "up to date"}
    assert witness.answered == [200, 200]  # old 0, then a proof from the first
    served = auditor.get("ledger/checkpoint").content.decode()
    opened = notes.open_checkpoint(served, signing.signer().note_verifier(),
                                   [witness.verifier()])
    assert opened.checkpoint.size == second.size and NAME in opened.cosigned_by
    assert Cosignature.objects.filter(witness=NAME).count() == 2


def test_a_409_is_followed_with_a_proof_from_the_size_the_witness_holds(witness):
    GoalFactory(checkpoints=3)
    held = sealing.seal().head
    tlog_witness.submit_due()
    # The log forgets what the witness holds (a restored database, a new cache).
    Cosignature.objects.all().delete()
    cache.clear()
    GoalFactory(checkpoints=2)
    head = sealing.seal().head
    assert tlog_witness.holds(tlog_witness.configured()[0]) == 0
    assert tlog_witness.submit_due() == {NAME: f"cosigned {head.size}"}
    assert witness.answered == [200, 409, 200]
    assert json.loads(witness.path.read_text())[head.checkpoint.split("\n")[0]]["size"] \
        == head.size > held.size


def test_a_witness_that_is_down_is_retried_with_backoff_and_sealing_goes_on(
        sealer_record, settings, clock, caplog):
    cache.clear()
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    key = notes.verifier(NAME, Ed25519PrivateKey.generate().public_key(),
                         notes.COSIGNATURE_V1)
    settings.WAKELEDGER_TLOG_WITNESSES = [f"http://127.0.0.1:{port} {key.text()}"]
    GoalFactory(checkpoints=2)
    sealing.seal()
    assert tlog_witness.submit_due()[NAME].startswith("failed: ")
    row = Schedule.objects.get(name=tlog_witness.SCHEDULE_NAME)
    assert row.next_run == clock() + timedelta(seconds=30)
    assert tlog_witness.submit_due()[NAME].startswith("waiting until ")
    clock.advance(seconds=30)
    assert tlog_witness.submit_due()[NAME].startswith("failed: ")
    assert Schedule.objects.get(name=tlog_witness.SCHEDULE_NAME).next_run == \
        clock() + timedelta(seconds=60)
    GoalFactory(checkpoints=1)
    assert sealing.seal().head is not None  # the seal never waits for a witness
    assert "did not cosign" in caplog.text
    cache.clear()


def test_a_witness_ahead_of_the_log_is_reported_not_argued_with(witness, caplog):
    GoalFactory(checkpoints=3)
    head = sealing.seal().head
    origin = head.checkpoint.split("\n")[0]
    witness.held[origin] = add_checkpoint.Held(head.size + 5, b"\0" * 32, "")
    outcome = tlog_witness.submit_due()[NAME]
    assert outcome.startswith("failed: ") and "more than the log's" in outcome
    assert witness.answered == [409]
    assert "rolled back or forked" in caplog.text
    assert not Cosignature.objects.exists()


def test_an_answer_that_is_not_the_witness_cosignature_is_not_kept(witness, settings):
    other = notes.verifier(NAME, Ed25519PrivateKey.generate().public_key(),
                           notes.COSIGNATURE_V1)
    url = settings.WAKELEDGER_TLOG_WITNESSES[0].split(" ")[0]
    settings.WAKELEDGER_TLOG_WITNESSES = [f"{url} {other.text()}"]  # another key, same name
    GoalFactory(checkpoints=1)
    sealing.seal()
    assert tlog_witness.submit_due()[NAME].startswith("failed: ")
    assert not Cosignature.objects.exists()
    assert cosigning.witnesses() == [other]


@pytest.mark.parametrize("entry", ["ftp://w.example " + "x", "http://w.example",
                                   "http://w.example not-a-key"])
def test_a_witness_entry_that_is_not_url_and_cosigner_key_is_refused(entry):
    with pytest.raises(ValueError):
        add_checkpoint.parse([entry])


def test_a_log_key_is_not_a_witness_key():
    log_key = notes.verifier("log.example", Ed25519PrivateKey.generate().public_key())
    with pytest.raises(ValueError, match="not a cosigner key"):
        add_checkpoint.parse([f"http://w.example {log_key.text()}"])


def test_a_head_sealed_during_a_failed_round_keeps_its_sooner_row(sealer_record, settings,
                                                                 clock, monkeypatch):
    cache.clear()
    key = notes.verifier(NAME, Ed25519PrivateKey.generate().public_key(),
                         notes.COSIGNATURE_V1)
    settings.WAKELEDGER_TLOG_WITNESSES = [f"http://127.0.0.1:9 {key.text()}"]
    GoalFactory(checkpoints=1)
    sealing.seal()

    def slow_and_down(witness, head):
        clock.advance(seconds=5)
        tlog_witness.enqueue()  # another process's seal commits meanwhile
        raise tlog_witness.SubmitFailed("down")

    monkeypatch.setattr(tlog_witness, "submit", slow_and_down)
    tlog_witness.submit_due()
    assert list(Schedule.objects.filter(name=tlog_witness.SCHEDULE_NAME)
                .values_list("next_run", flat=True)) == [clock()]
    cache.clear()


def test_ledger_seal_says_the_scheduler_sends_the_head_to_the_witnesses(witness):
    out = io.StringIO()
    GoalFactory(checkpoints=1)
    call_command("ledger", "seal", stdout=out)
    assert out.getvalue().splitlines()[-1] == \
        "the scheduler sends it to 1 C2SP witness(es) by add-checkpoint"
    assert Schedule.objects.filter(name=tlog_witness.SCHEDULE_NAME).exists()
