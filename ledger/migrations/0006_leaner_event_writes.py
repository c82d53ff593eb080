"""Two fewer pages written by every append (docs/decisions.md, Performance and speed).

- The event's own index on ``goal_id`` goes: the (goal, seq) unique index
  starts with the goal and serves the same reads. Dropped with plain SQL, so
  SQLite does not copy the whole table for it.
- SQLite's ``AUTOINCREMENT`` goes (``EventIdField``): SQLite can only drop it
  by rebuilding the table, which this migration does once; on a large SQLite
  ledger that is a full copy of the event table (minutes per few million
  events), so plan it like a backup. PostgreSQL changes nothing there.
"""

import ledger.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('ledger', '0005_scoped_bindings'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='event',
                    name='goal',
                    field=models.ForeignKey(db_index=False, on_delete=models.deletion.PROTECT,
                                            related_name='events', to='ledger.goal'),
                ),
            ],
            database_operations=[
                # Django's name for the foreign key's index (the same on both
                # databases: a hash of table and column).
                migrations.RunSQL(
                    "DROP INDEX IF EXISTS ledger_event_goal_id_e13c56ae",
                    reverse_sql="CREATE INDEX ledger_event_goal_id_e13c56ae "
                                "ON ledger_event (goal_id)",
                ),
            ],
        ),
        migrations.AlterField(
            model_name='event',
            name='id',
            field=ledger.models.EventIdField(primary_key=True, serialize=False),
        ),
    ]
