"""The log's add-checkpoint submission with real processes on PostgreSQL: the
test seals (its commit writes the submission's django-q2 row), a real
`manage.py qcluster` runs the row, and a real `wakeledger-verify witness
--serve` process cosigns; the cosignature lands in the database and is served
with the checkpoint. About 10 s, most of it the cluster's start-up.
"""

import subprocess
import sys

import pytest
from django.db import connection

from ledger.log import cosigning, sealing, signing, tlog_witness
from ledger.models import Cosignature
from tests.factories import GoalFactory
from tests.helpers import manage_env, manage_processes, wait_for
from wakeledger_verify import notes

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_the_scheduler_pushes_a_new_checkpoint_to_a_witness_process(settings, tmp_path,
                                                                   sealer_record):
    if connection.vendor != "postgresql":
        pytest.skip("the real-process end-to-end tests run in the PostgreSQL half of the suite")
    log_key = signing.signer().note_verifier()
    witness = subprocess.Popen(
        [sys.executable, "-m", "wakeledger_verify", "witness", "--serve", "127.0.0.1:0",
         "--key", str(tmp_path / "w.pem"), "--name", "e2e.example/w", "--log-key",
         log_key.text(), "--state", str(tmp_path / "w.json")],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        words = witness.stdout.readline().split()
        entry = f"{words[3].removesuffix('/add-checkpoint')} {words[-1]}"
        settings.WAKELEDGER_TLOG_WITNESSES = [entry]
        GoalFactory(checkpoints=2)
        head = sealing.seal().head  # commits the head and the submission's row
        env = manage_env(settings, tmp_path, WAKELEDGER_TLOG_WITNESSES=entry,
                         WAKELEDGER_Q_GUARD_CYCLE="30",  # look at schedules at start-up
                         WAKELEDGER_SIGNING_KEY_FILE=str(settings.WAKELEDGER_SIGNING_KEY_FILE))
        with manage_processes(env, tmp_path) as processes:
            processes.spawn("qcluster", "qcluster")
            wait_for(lambda: Cosignature.objects.filter(head=head,
                                                        witness="e2e.example/w").exists(),
                     what="the witness's cosignature")
    finally:
        witness.terminate()
        witness.wait(timeout=10)
    opened = notes.open_checkpoint(cosigning.cosigned(head), log_key,
                                   [notes.parse_verifier(words[-1])])
    assert "e2e.example/w" in opened.cosigned_by
    assert tlog_witness.submit_due() == {"e2e.example/w": "up to date"}
