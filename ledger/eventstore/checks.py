"""System check: the events table's append-only triggers are in place.

Runs with database checks (``manage.py check --database default``, and before
``migrate``), so a table rebuilt without its triggers is reported instead of
silently accepting UPDATE and DELETE.
"""

from collections.abc import Iterable
from typing import Any

from django.core.checks import Error, Tags, register
from django.db import connections


@register(Tags.database)
def append_only_triggers(app_configs: Any = None, databases: Iterable[str] | None = None,
                         **kwargs: Any) -> list[Error]:
    from ledger.eventstore import triggers

    errors = []
    for alias in databases or ():
        connection = connections[alias]
        if connection.vendor not in {"sqlite", "postgresql"}:
            continue
        if not triggers.table_exists(connection):
            continue  # not migrated yet
        missing = triggers.expected(connection) - triggers.installed(connection)
        if missing:
            errors.append(Error(
                f"the events table has lost its append-only triggers: {', '.join(sorted(missing))}",
                hint="Run `manage.py migrate`; it re-installs them.",
                id="ledger.E001",
            ))
    return errors
