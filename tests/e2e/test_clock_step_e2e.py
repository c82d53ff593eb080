"""A clock stepped back, end to end, with real processes on the PostgreSQL
database the test shares with them: a real `manage.py qcluster` and the
notification watch (`manage.py ledger notify --every 1`, the Procfile's
`watch`).

What a server clock that ran two hours ahead for a few minutes leaves behind
is written as it would be: the sweeper's last beat and django-q2's rows for
the sweeper and the hourly repair two hours ahead. The cluster alone never
sweeps then (its rows are not due for two hours); the watch, a process
other than the scheduler, reads the future beat as silence, tells it once,
restores the rows, and the cluster's next sweep is told back."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from django_q.models import Schedule

from ledger.models import SchedulerBeat
from ledger.operators.doctor import REPAIR_NAME, SWEEPER_NAME, ensure_repair, ensure_sweeper
from ledger.services.alerts import SWEEPER
from tests.helpers import manage_env, manage_processes, wait_for
from tests.receivers import receiving

BOOT = 120  # seconds: a process's start on a loaded 2-core machine
AHEAD = timedelta(hours=2)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(autouse=True)
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("runs once, in the PostgreSQL half: a qcluster, the watch and the test "
                    "share one database")


def last_sweep():
    return SchedulerBeat.objects.filter(name=SWEEPER).values_list("at", flat=True).first()


def titles(hooks: list) -> list[str]:
    return [json.loads(body)["title"] for _, body in hooks]


def test_rows_a_stepped_clock_left_hours_ahead_are_restored_and_told(settings, tmp_path):
    ensure_sweeper(force=True)
    ensure_repair(force=True)
    ahead = timezone.now() + AHEAD
    Schedule.objects.filter(name__in=(SWEEPER_NAME, REPAIR_NAME)).update(next_run=ahead)
    SchedulerBeat.objects.update_or_create(name=SWEEPER, defaults={"at": ahead})
    with receiving() as (hook_url, hooks):
        env = manage_env(settings, tmp_path, SITE_URL="http://ledger.test",
                         WAKELEDGER_NOTIFY=hook_url.replace("http://", "json://"),
                         WAKELEDGER_Q_GUARD_CYCLE="30")
        with manage_processes(env, tmp_path) as processes:
            processes.spawn("qcluster", "qcluster")
            processes.spawn("watch", "ledger", "notify", "--every", "1")
            wait_for(lambda: titles(hooks), BOOT, what="the watch to tell the silence")
            assert titles(hooks) == ["Wake Ledger: the scheduler is silent"]
            wait_for(lambda: last_sweep() < ahead, BOOT,
                     what="the cluster's sweep on the restored row")
            wait_for(lambda: len(hooks) == 2, BOOT, what="the scheduler told back")
    assert titles(hooks) == ["Wake Ledger: the scheduler is silent",
                             "Wake Ledger: the scheduler runs again"]
    assert Schedule.objects.get(name=SWEEPER_NAME).next_run < timezone.now() + timedelta(
        minutes=settings.WAKELEDGER_SWEEP_MINUTES + 1)
