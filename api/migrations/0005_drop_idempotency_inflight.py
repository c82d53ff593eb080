"""Idempotency records lose what only "in flight" records used.

Development builds before 0.1.0 committed a record before its command ran
(``status_code`` NULL until it was answered, ``locked_until`` and
``attempt`` naming the attempt that owned the key). Since 7 December 2026 a
record is written with its answer in the command's own transaction, so
every record is complete and nothing reads those columns. An unanswered
record left by such a build is deleted first: its request's retry then runs,
as it would have once its lock expired. The table is small (a retention's
worth of answers); SQLite rebuilds it, PostgreSQL drops two columns and
checks one NOT NULL.
"""

from django.db import migrations, models


def forget_unanswered(apps, schema_editor):
    record = apps.get_model("api", "IdempotencyRecord")
    record.objects.using(schema_editor.connection.alias).filter(status_code__isnull=True).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("api", "0004_oauth_audit"),
    ]

    operations = [
        migrations.RunPython(forget_unanswered, migrations.RunPython.noop, elidable=True),
        migrations.RemoveField(
            model_name="idempotencyrecord",
            name="attempt",
        ),
        migrations.RemoveField(
            model_name="idempotencyrecord",
            name="locked_until",
        ),
        migrations.AlterField(
            model_name="idempotencyrecord",
            name="status_code",
            field=models.PositiveSmallIntegerField(),
        ),
    ]
