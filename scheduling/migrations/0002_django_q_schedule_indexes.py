"""Indexes on django-q2's schedule table for the two lookups that touch it at scale.

- ``next_run``: every scheduler pass (``django_q.scheduler.scheduler``) runs
  ``SELECT ... FROM django_q_schedule WHERE NOT (repeats = 0) AND next_run < now
  AND (cluster IS NULL OR cluster = ...) ORDER BY next_run FOR UPDATE``.
  django-q2 indexes none of those columns, so each pass read every schedule:
  with one watchdog per active goal, its cost grew with the goals, not with
  the wakes due. With this index the pass reads the due rows, already in
  ``next_run`` order.
- ``name``: ``scheduling.watchdogs`` deletes a goal's schedule by name
  whenever a watchdog is created or cancelled and whenever a one-off wake is
  used up, inside the command's transaction (under SQLite's write lock).

django-q2's own migrations are left alone: its model state does not know of
these indexes (RunSQL changes no state, so ``makemigrations --check`` stays
clean for both apps). ``IF NOT EXISTS`` / ``IF EXISTS`` are valid on SQLite and
PostgreSQL alike.
"""

from django.db import migrations

INDEXES = {
    "wakeledger_q_schedule_next_run": "next_run",
    "wakeledger_q_schedule_name": "name",
}


class Migration(migrations.Migration):

    dependencies = [
        ("scheduling", "0001_dispatch_outbox"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [
        migrations.RunSQL(
            sql=f"CREATE INDEX IF NOT EXISTS {name} ON django_q_schedule ({column})",
            reverse_sql=f"DROP INDEX IF EXISTS {name}",
        )
        for name, column in INDEXES.items()
    ]
