"""`ledger prune` runs on a django-q2 schedule that `migrate` creates."""

import io
import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django_q.models import Schedule, Task
from django_q.tasks import async_task

from ledger.access import accounts
from ledger.access.models import IdempotencyRecord, McpLease
from scheduling import maintenance
from tests.factories import GoalFactory

pytestmark = pytest.mark.django_db


def record(key: str, created_at, *, status_code: int = 201) -> IdempotencyRecord:
    return IdempotencyRecord.objects.create(
        owner="agent-1", key=key, fingerprint="0" * 64, created_at=created_at,
        status_code=status_code, response="{}")


@pytest.fixture
def records(clock, settings):
    """Records of ages around the retention (48 h by default)."""
    retention = timedelta(hours=settings.WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS)
    now = clock()
    record("week-old", now - timedelta(days=7))
    record("just-expired", now - retention - timedelta(seconds=1))
    record("just-expired-refusal", now - retention - timedelta(seconds=1), status_code=409)
    record("exactly-retention", now - retention)
    record("fresh", now - timedelta(minutes=5))
    record("just-now", now, status_code=409)


def keys() -> set[str]:
    return set(IdempotencyRecord.objects.values_list("key", flat=True))


def test_migrate_creates_exactly_one_hourly_prune_schedule():
    Schedule.objects.filter(name=maintenance.PRUNE_NAME).delete()
    call_command("migrate", verbosity=0)
    call_command("migrate", verbosity=0)
    [schedule] = Schedule.objects.filter(name=maintenance.PRUNE_NAME)
    assert schedule.func == "scheduling.maintenance.prune"
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
    assert keys() == {"exactly-retention", "fresh", "just-now"}


def test_the_task_and_ledger_prune_agree(records, settings):
    out = io.StringIO()
    call_command("ledger", "prune", stdout=out)
    assert out.getvalue().splitlines() == [
        "deleted 3 idempotency record(s) older than 48 h",
        "deleted 0 MCP lease row(s) whose lease ended over 48 h ago"]
    assert maintenance.prune() == 0
    assert keys() == {"exactly-retention", "fresh", "just-now"}


def test_the_task_follows_the_retention_setting(records, settings):
    settings.WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS = 1
    assert maintenance.prune() == 4
    assert keys() == {"fresh", "just-now"}


# ---------------------------------------------------------------- /mcp lease rows


def shelf(holder: str, goal_id: str, generation: int, written) -> None:
    McpLease.objects.create(holder=holder, goal_id=goal_id, generation=generation,
                            owner="agent-1", key="k" * 64, path=f"goals/{goal_id}/lease")
    # auto_now wrote the wall clock's time: the row's age is the test's to set.
    McpLease.objects.filter(holder=holder, goal_id=goal_id).update(updated_at=written)


def shelved() -> set[tuple[str, str]]:
    return set(McpLease.objects.values_list("holder", "goal_id"))


def test_the_prune_deletes_mcp_lease_rows_no_lease_stands_behind(clock, settings):
    retention = timedelta(hours=settings.WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS)
    start = clock()
    ended = str(GoalFactory(finish="failed").id)  # no lease: released with its end
    expired = str(GoalFactory().id)  # leased, never renewed: expired long ago
    clock.advance(seconds=(retention * 1.5).total_seconds())
    held = str(GoalFactory().id)  # its lease is current
    old = start
    shelf("token:1", held, 1, old)  # an old row, but its goal holds that lease: kept
    shelf("token:2", held, 0, old)  # an older generation of it
    shelf("token:1", ended, 1, old)
    shelf("token:2", ended, 1, clock())  # written lately: kept whatever the goal says
    shelf("token:1", expired, 1, old)
    shelf("token:1", str(uuid.uuid4()), 1, old)  # a goal that is gone
    shelf("token:1", "not-a-goal-id", 1, old)

    [schedule] = Schedule.objects.filter(name=maintenance.PRUNE_NAME)
    task_id = async_task(schedule.func, sync=True)  # as django-q2 runs it, by its name
    task = Task.objects.get(id=task_id)
    assert task.success and task.result == 5
    assert shelved() == {("token:1", held), ("token:2", ended)}
    assert accounts.prune_mcp_leases() == 0


def test_the_prune_reads_mcp_lease_rows_in_batches(clock, settings):
    clock.advance(hours=settings.WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS * 3)
    held = str(GoalFactory().id)
    for n in range(7):
        shelf(f"token:{n}", held if n % 3 == 0 else str(uuid.uuid4()), 1, clock() - timedelta(
            hours=settings.WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS + 1))
    assert accounts.prune_mcp_leases(batch=2) == 4
    assert shelved() == {(f"token:{n}", held) for n in (0, 3, 6)}
