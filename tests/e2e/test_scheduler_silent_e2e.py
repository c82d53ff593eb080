"""The scheduler-silent alarm end to end, with real processes on the
PostgreSQL database the test shares with them: a real `manage.py qcluster`
(the scheduler), the notification watch (`manage.py ledger notify --every 1`,
the Procfile's `watch`) and a real webhook receiver.

kill -9 of the whole cluster, then nothing but real time passes (the silence
threshold is a few seconds here, WAKELEDGER_SCHEDULER_SILENT_SECONDS): the
watch tells the silence exactly once; a new cluster sweeps and the scheduler
is told back exactly once. The watch then stops cleanly on SIGTERM."""

import json
import os
import signal

import pytest
from django.db import connection
from django.utils import timezone
from django_q.models import Schedule

from ledger.domain import notices
from ledger.domain.events import iso
from ledger.models import Notification, SchedulerBeat
from ledger.operators.doctor import SWEEPER_NAME
from ledger.services.alerts import SWEEPER
from tests.helpers import manage_env, manage_processes, wait_for
from tests.receivers import receiving

SILENT_SECONDS = 10
BOOT = 120  # seconds: a process's start on a loaded 2-core machine

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(autouse=True)
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("runs once, in the PostgreSQL half: a qcluster, the watch and the test "
                    "share one database")


def last_sweep():
    return SchedulerBeat.objects.filter(name=SWEEPER).values_list("at", flat=True).first()


def sweep_due_now() -> None:
    """The sweeper's row due at once, as any real silence (minutes, not
    seconds) leaves it: a cluster looks at its rows as it starts
    (WAKELEDGER_Q_GUARD_CYCLE=30), so it sweeps without waiting for the
    minute of its row."""
    assert Schedule.objects.filter(name=SWEEPER_NAME).update(next_run=timezone.now()) == 1


def titles(hooks: list) -> list[str]:
    return [json.loads(body)["title"] for _, body in hooks]


def test_the_watch_tells_a_killed_scheduler_once_and_its_return_once(settings, tmp_path):
    with receiving() as (hook_url, hooks):
        env = manage_env(settings, tmp_path, SITE_URL="http://ledger.test",
                         WAKELEDGER_NOTIFY=hook_url.replace("http://", "json://"),
                         WAKELEDGER_SCHEDULER_SILENT_SECONDS=str(SILENT_SECONDS),
                         WAKELEDGER_Q_GUARD_CYCLE="30")
        with manage_processes(env, tmp_path) as processes:
            sweep_due_now()
            first = processes.spawn("qcluster", "qcluster")
            watch = processes.spawn("watch", "ledger", "notify", "--every", "1")
            beat = wait_for(last_sweep, BOOT, what="the first cluster's sweep")
            os.killpg(first.pid, signal.SIGKILL)  # kill -9 of the whole scheduler
            first.wait(timeout=30)
            # Only real time passes: the watch notices the silence and tells it.
            wait_for(lambda: titles(hooks), BOOT, what="the watch to tell the silence")
            assert titles(hooks) == ["Wake Ledger: the scheduler is silent"]
            assert last_sweep() == beat  # nothing swept meanwhile
            assert f"since {iso(beat)}" in json.loads(hooks[0][1])["message"]

            sweep_due_now()
            processes.spawn("qcluster", "qcluster")
            wait_for(lambda: len(hooks) == 2, BOOT, what="the scheduler told back")
            # Stop the watch before the next (test-short) silence could start.
            watch.send_signal(signal.SIGTERM)
            assert watch.wait(timeout=60) == 0
    assert titles(hooks) == ["Wake Ledger: the scheduler is silent",
                             "Wake Ledger: the scheduler runs again"]
    rows = list(Notification.objects.order_by("pk").values_list("kind", "status"))
    assert rows == [(notices.SCHEDULER_SILENT, "sent"), (notices.SCHEDULER_BACK, "sent")]
    watched = next(tmp_path.glob("watch-*.log")).read_text()
    assert "scheduler silent; 1 notification(s) sent" in watched
    assert "stopped after" in watched  # its loop ended: a clean stop
