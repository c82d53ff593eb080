"""``flush`` that respects the append-only ledger.

Django's flush empties every table with DELETE (SQLite) or TRUNCATE
(PostgreSQL); the append-only triggers refuse both, which is what production
wants. The test suite must still empty the database between transactional
tests, so with WAKELEDGER_ALLOW_FLUSH set the triggers are lifted for the flush
and put back right after it.
"""

from typing import Any

from django.conf import settings
from django.core.management.commands import flush
from django.db import connections

from ledger.eventstore import triggers


class Command(flush.Command):
    def handle(self, **options: Any) -> None:
        if not settings.WAKELEDGER_ALLOW_FLUSH:
            return super().handle(**options)
        connection = connections[options["database"]]
        triggers.drop(connection)
        try:
            return super().handle(**options)
        finally:
            triggers.install(connection)
