"""`ledger prune` runs on a django-q2 schedule that `migrate` creates."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django_q.models import Schedule, Task
from django_q.tasks import async_task

from ledger.access.models import IdempotencyRecord
from scheduling import maintenance

pytestmark = pytest.mark.django_db


def record(key: str, created_at, *, done: bool = True) -> IdempotencyRecord:
    return IdempotencyRecord.objects.create(
        owner="agent-1", key=key, fingerprint="0" * 64, created_at=created_at,
        locked_until=created_at + timedelta(seconds=60), status_code=201 if done else None,
        response="{}" if done else "", attempt="a" * 32)


@pytest.fixture
def records(clock, settings):
    """Records of ages around the retention (48 h by default)."""
    retention = timedelta(hours=settings.WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS)
    now = clock()
    record("week-old", now - timedelta(days=7))
    record("just-expired", now - retention - timedelta(seconds=1))
    record("just-expired-in-flight", now - retention - timedelta(seconds=1), done=False)
    record("exactly-retention", now - retention)
    record("fresh", now - timedelta(minutes=5))
    record("in-flight", now, done=False)


def keys() -> set[str]:
    return set(IdempotencyRecord.objects.values_list("key", flat=True))


def test_migrate_creates_exactly_one_hourly_prune_schedule():
    Schedule.objects.filter(name=maintenance.PRUNE_NAME).delete()
    call_command("migrate", verbosity=0)
    call_command("migrate", verbosity=0)
    [schedule] = Schedule.objects.filter(name=maintenance.PRUNE_NAME)
    assert schedule.func == "scheduling.maintenance.prune_idempotency_records"
    assert schedule.schedule_type == Schedule.HOURLY and schedule.repeats == -1


def test_migrate_puts_an_edited_prune_schedule_back():
    Schedule.objects.filter(name=maintenance.PRUNE_NAME).update(
        func="scheduling.tasks.nothing", schedule_type=Schedule.DAILY, repeats=0)
    call_command("migrate", verbosity=0)
    [schedule] = Schedule.objects.filter(name=maintenance.PRUNE_NAME)
    assert (schedule.func, schedule.schedule_type, schedule.repeats) == \
        (maintenance.PRUNE, Schedule.HOURLY, -1)


def test_the_scheduled_task_deletes_only_expired_records(records):
    """Run the schedule's func the way django-q2 runs it (by its dotted name)."""
    [schedule] = Schedule.objects.filter(name=maintenance.PRUNE_NAME)
    task_id = async_task(schedule.func, sync=True)

    task = Task.objects.get(id=task_id)
    assert task.success and task.result == 3
    assert keys() == {"exactly-retention", "fresh", "in-flight"}


def test_the_task_and_ledger_prune_agree(records, settings):
    out = io.StringIO()
    call_command("ledger", "prune", stdout=out)
    assert out.getvalue().strip() == "deleted 3 idempotency record(s) older than 48 h"
    assert maintenance.prune_idempotency_records() == 0
    assert keys() == {"exactly-retention", "fresh", "in-flight"}


def test_the_task_follows_the_retention_setting(records, settings):
    settings.WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS = 1
    assert maintenance.prune_idempotency_records() == 4
    assert keys() == {"fresh", "in-flight"}
