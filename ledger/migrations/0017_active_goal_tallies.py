# A data migration: the active goals' tallies, counted once.

from django.db import migrations
from django.db.models import Count

# Frozen here (a migration must not follow later code): the terminal
# statuses, and the tallies ledger/eventstore/tallies.py keeps of goals.
TERMINAL = ("done", "failed", "stopped")
ACTIVE = "goals_active"
ENDED = "goals_ended"


def count_goals(apps, schema_editor):
    """Every goal counted by status and reason into its tally (active or
    ended): from now on the store moves them with each change of status, and
    /metrics reads them instead of counting the active goals. The ended
    tallies (kept since 0010) are set again from the same count, so both
    start from one snapshot of the goal table. Rows are set in place and the
    table is locked against writers first on PostgreSQL (as
    ``tallies.recount`` does), so a process still running the previous
    version during the upgrade adds its ended goals after the count, never
    into a row being replaced."""
    connection = schema_editor.connection
    alias = connection.alias
    Goal, Tally = apps.get_model("ledger", "Goal"), apps.get_model("ledger", "Tally")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {connection.ops.quote_name(Tally._meta.db_table)} "
                           "IN SHARE ROW EXCLUSIVE MODE")
    grouped = (Goal.objects.using(alias).exclude(status="").order_by()
               .values("status", "reason").annotate(n=Count("id")))
    counted = {(ENDED if row["status"] in TERMINAL else ACTIVE,
                f"reason={row['reason']},status={row['status']}"): row["n"] for row in grouped}
    tallies = Tally.objects.using(alias)
    tallies.filter(name__in=(ACTIVE, ENDED)).update(value=0)
    for (name, labels), n in counted.items():
        tallies.update_or_create(name=name, labels=labels, defaults={"value": n})


def forget_active(apps, schema_editor):
    """Back to 0016, where /metrics counts the active goals itself."""
    Tally = apps.get_model("ledger", "Tally")
    Tally.objects.using(schema_editor.connection.alias).filter(name=ACTIVE).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('ledger', '0016_doctor_passes'),
    ]

    operations = [
        migrations.RunPython(count_goals, forget_active),
    ]
