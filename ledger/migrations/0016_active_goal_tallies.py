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
    start from one snapshot of the goal table."""
    alias = schema_editor.connection.alias
    Goal, Tally = apps.get_model("ledger", "Goal"), apps.get_model("ledger", "Tally")
    grouped = (Goal.objects.using(alias).exclude(status="").order_by()
               .values("status", "reason").annotate(n=Count("id")))
    Tally.objects.using(alias).filter(name__in=(ACTIVE, ENDED)).delete()
    Tally.objects.using(alias).bulk_create([
        Tally(name=ENDED if row["status"] in TERMINAL else ACTIVE,
              labels=f"reason={row['reason']},status={row['status']}", value=row["n"])
        for row in grouped])


def forget_active(apps, schema_editor):
    """Back to 0015, where /metrics counts the active goals itself."""
    Tally = apps.get_model("ledger", "Tally")
    Tally.objects.using(schema_editor.connection.alias).filter(name=ACTIVE).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('ledger', '0015_drop_unread_goal_indexes'),
    ]

    operations = [
        migrations.RunPython(count_goals, forget_active),
    ]
