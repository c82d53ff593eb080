from typing import Any

from django.apps import AppConfig
from django.db import connections
from django.db.models.signals import post_migrate


def _reinstall_triggers(sender: AppConfig, using: str = "default", **kwargs: Any) -> None:
    from ledger import triggers

    connection = connections[using]
    if triggers.table_exists(connection):
        triggers.install(connection)


class LedgerConfig(AppConfig):
    name = "ledger"
    verbose_name = "Ledger"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from ledger import checks  # noqa: F401  (registers the trigger check)

        # After every migrate (and flush), whatever rebuilt the events table.
        post_migrate.connect(_reinstall_triggers, sender=self,
                             dispatch_uid="ledger.reinstall_triggers")
