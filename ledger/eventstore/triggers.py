"""Database triggers that make the events table append-only (the second layer).

Installed by migration 0002 and re-installed after every ``migrate`` (see
``LedgerConfig.ready``): SQLite rebuilds a table for many schema changes
(``ALTER`` of a column, a new constraint) and the rebuilt table has no
triggers. Re-installing is idempotent on both databases.
"""

from django.db.backends.base.base import BaseDatabaseWrapper

TABLE = "ledger_event"
NAMES = ("ledger_event_no_update", "ledger_event_no_delete")
PG_TRUNCATE = "ledger_event_no_truncate"

# Drop and create rather than CREATE ... IF NOT EXISTS: a trigger of that name
# left on a renamed table would otherwise make the install a silent no-op.
_SQLITE = [
    "DROP TRIGGER IF EXISTS ledger_event_no_update",
    f"""CREATE TRIGGER ledger_event_no_update BEFORE UPDATE ON {TABLE}
        BEGIN SELECT RAISE(ABORT, '{TABLE} is append-only: UPDATE refused'); END""",
    "DROP TRIGGER IF EXISTS ledger_event_no_delete",
    f"""CREATE TRIGGER ledger_event_no_delete BEFORE DELETE ON {TABLE}
        BEGIN SELECT RAISE(ABORT, '{TABLE} is append-only: DELETE refused'); END""",
]

_POSTGRES = [
    f"""CREATE OR REPLACE FUNCTION ledger_event_append_only() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION '{TABLE} is append-only: % refused', TG_OP;
        END $$""",
    f"DROP TRIGGER IF EXISTS ledger_event_no_update ON {TABLE}",
    f"""CREATE TRIGGER ledger_event_no_update BEFORE UPDATE ON {TABLE}
        FOR EACH ROW EXECUTE FUNCTION ledger_event_append_only()""",
    f"DROP TRIGGER IF EXISTS ledger_event_no_delete ON {TABLE}",
    f"""CREATE TRIGGER ledger_event_no_delete BEFORE DELETE ON {TABLE}
        FOR EACH ROW EXECUTE FUNCTION ledger_event_append_only()""",
    f"DROP TRIGGER IF EXISTS {PG_TRUNCATE} ON {TABLE}",
    f"""CREATE TRIGGER {PG_TRUNCATE} BEFORE TRUNCATE ON {TABLE}
        FOR EACH STATEMENT EXECUTE FUNCTION ledger_event_append_only()""",
]


def _statements(connection: BaseDatabaseWrapper) -> list[str]:
    if connection.vendor == "sqlite":
        return _SQLITE
    if connection.vendor == "postgresql":
        return _POSTGRES
    raise NotImplementedError(f"no append-only triggers for {connection.vendor}")


def expected(connection: BaseDatabaseWrapper) -> set[str]:
    names = set(NAMES)
    if connection.vendor == "postgresql":
        names.add(PG_TRUNCATE)
    return names


def install(connection: BaseDatabaseWrapper) -> None:
    with connection.cursor() as cursor:
        for sql in _statements(connection):
            cursor.execute(sql)


def drop(connection: BaseDatabaseWrapper) -> None:
    with connection.cursor() as cursor:
        for name in sorted(expected(connection)):
            if connection.vendor == "sqlite":
                cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
            else:
                cursor.execute(f"DROP TRIGGER IF EXISTS {name} ON {TABLE}")


def installed(connection: BaseDatabaseWrapper) -> set[str]:
    """The append-only triggers the database has right now."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s",
                [TABLE],
            )
        else:
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
                [TABLE],
            )
        return {row[0] for row in cursor.fetchall()} & expected(connection)


def table_exists(connection: BaseDatabaseWrapper) -> bool:
    return TABLE in connection.introspection.table_names()
