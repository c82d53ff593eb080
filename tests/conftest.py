from datetime import UTC, datetime

import pytest
from django.db import connection

from ledger import clock as ledger_clock


def pytest_report_header(config: pytest.Config) -> str:
    from django.conf import settings

    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    return f"wakeledger database: {engine}"


@pytest.fixture
def clock():
    """A frozen, controllable clock for every rule that reads the time."""
    frozen = ledger_clock.FrozenClock(datetime(2026, 12, 2, 9, 0, tzinfo=UTC))
    with ledger_clock.use(frozen):
        yield frozen


@pytest.fixture
def vendor(db) -> str:
    return connection.vendor
