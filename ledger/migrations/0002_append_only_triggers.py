"""Refuse UPDATE and DELETE on the events table in the database itself.

The same triggers are re-installed after every migrate (LedgerConfig.ready),
because SQLite drops a table's triggers when a later migration rebuilds it.
"""

from django.db import migrations


def install(apps, schema_editor):
    from ledger.eventstore import triggers

    triggers.install(schema_editor.connection)


def drop(apps, schema_editor):
    from ledger.eventstore import triggers

    triggers.drop(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("ledger", "0001_initial")]

    operations = [migrations.RunPython(install, drop, elidable=False)]
