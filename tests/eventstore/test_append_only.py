"""Events are append-only in three layers: model, database triggers, admin."""

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction

from ledger.eventstore import triggers
from ledger.models import AppendOnlyError, Event
from tests.factories import GoalFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def event():
    goal = GoalFactory(checkpoints=1)
    return Event.objects.filter(goal=goal).order_by("seq").first()


def test_the_model_refuses_to_change_or_delete_a_stored_event(event):
    event.kind = "goal.completed"
    with pytest.raises(AppendOnlyError):
        event.save()
    with pytest.raises(AppendOnlyError):
        event.delete()
    with pytest.raises(AppendOnlyError):
        Event.objects.filter(pk=event.pk).update(kind="x")
    with pytest.raises(AppendOnlyError):
        Event.objects.filter(pk=event.pk).delete()
    with pytest.raises(AppendOnlyError):
        Event.objects.bulk_update([event], ["kind"])
    assert Event.objects.get(pk=event.pk).kind == "goal.started"


def test_the_triggers_exist_after_all_migrations(db):
    assert triggers.installed(connection) == triggers.expected(connection)
    expected = {"ledger_event_no_update", "ledger_event_no_delete"}
    if connection.vendor == "postgresql":
        expected.add("ledger_event_no_truncate")
    assert triggers.installed(connection) == expected


@pytest.mark.parametrize("sql", [
    "UPDATE ledger_event SET kind = 'tampered' WHERE id = %s",
    "UPDATE ledger_event SET data = data WHERE id = %s",
    "DELETE FROM ledger_event WHERE id = %s",
])
def test_raw_sql_update_and_delete_fail_in_the_database(event, sql):
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), \
            connection.cursor() as cursor:
        cursor.execute(sql, [event.pk])
    assert Event.objects.get(pk=event.pk).hash == event.hash


def test_truncate_fails_on_postgresql(event):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has no TRUNCATE")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), \
            connection.cursor() as cursor:
        # Settle the deferred foreign-key checks of the rows this test just
        # wrote; PostgreSQL refuses TRUNCATE while they are pending.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("TRUNCATE ledger_event CASCADE")
    assert Event.objects.filter(pk=event.pk).exists()


def test_migrate_reinstalls_triggers_that_a_table_rebuild_dropped(event):
    # What SQLite does to a table's triggers when a migration rebuilds it.
    triggers.drop(connection)
    assert triggers.installed(connection) == set()
    errors = run_checks(databases=["default"])
    assert [e.id for e in errors if e.id.startswith("ledger.")] == ["ledger.E001"]

    call_command("migrate", verbosity=0)

    assert triggers.installed(connection) == triggers.expected(connection)
    assert not [e for e in run_checks(databases=["default"]) if e.id.startswith("ledger.")]
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM ledger_event WHERE id = %s", [event.pk])


def test_a_rebuilt_table_on_sqlite_really_loses_its_triggers_and_gets_them_back(event):
    """Rebuild the events table the way Django's SQLite schema editor does for
    an ALTER (create new, copy, drop old, rename), then migrate: the triggers
    are back."""
    if connection.vendor != "sqlite":
        pytest.skip("only SQLite rebuilds tables")
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE new__ledger_event AS SELECT * FROM ledger_event")
        cursor.execute("DROP TABLE ledger_event")
        cursor.execute("ALTER TABLE new__ledger_event RENAME TO ledger_event")
    assert triggers.installed(connection) == set()
    call_command("migrate", verbosity=0)
    assert triggers.installed(connection) == triggers.expected(connection)
