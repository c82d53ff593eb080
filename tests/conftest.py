from datetime import UTC, datetime

import pytest
from django.db import connection

from ledger.eventstore import clock as ledger_clock


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


class Api:
    """A caller of the REST API with one role's bearer token."""

    def __init__(self, username: str, role: str):
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group
        from rest_framework.test import APIClient

        from ledger.access import accounts

        user, _ = get_user_model().objects.get_or_create(username=username)
        user.groups.add(Group.objects.get_or_create(name=role)[0])
        self.username = username
        self.token = accounts.issue_token(user)
        self.client = APIClient()
        self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {self.token}")

    def get(self, path: str, **params):
        return self.client.get(f"/api/v1/{path}", params)

    def post(self, path: str, body=None, *, key: str | None = None, raw: bytes | None = None,
             content_type: str = "application/json"):
        headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
        if raw is not None:
            return self.client.generic("POST", f"/api/v1/{path}", raw, content_type, **headers)
        return self.client.post(f"/api/v1/{path}", body if body is not None else {},
                                format="json", **headers)

    def start(self, **overrides):
        body = {"goal_key": "issue-1", "workspace": "/srv/repos/shop",
                "objective": "Fix the flaky checkout test", "done_criteria": ["CI green"],
                "next_actions": ["reproduce", "fix"], **overrides}
        return self.post("goals", body)


@pytest.fixture
def agent(db):
    return Api("agent-1", "agent")


@pytest.fixture
def started(agent, clock):
    """Start agent-1's goals through the API with a 300 s lease: ``start(**policy)``
    returns (goal id, lease proof). Modules that need another start define their own."""
    from tests.factories import start_goal

    def start(**policy):
        return start_goal(agent, **policy)

    return start


@pytest.fixture
def other_agent(db):
    return Api("agent-2", "agent")


@pytest.fixture
def auditor(db):
    return Api("auditor-1", "auditor")


@pytest.fixture
def operator(db):
    return Api("operator-1", "operator")


@pytest.fixture
def lock_waits(monkeypatch):
    """``lock_waits.wait()`` returns once another connection waits for a
    database lock (tests/helpers.py LockWaits): the sync point of a test that
    proves something waits, in place of a timed join."""
    from tests.helpers import LockWaits

    return LockWaits(monkeypatch)


@pytest.fixture
def sealer_record(settings, tmp_path):
    """The sealer's record outside the database (ledger/log/sealer_state.py), as a
    deployment keeps it: beside this test's own signing key (tests/settings.py
    keeps none, since every test's database is thrown away)."""
    settings.WAKELEDGER_SIGNING_KEY_FILE = tmp_path / "signing_key.pem"
    settings.WAKELEDGER_SEALER_STATE_FILE = ""
    return tmp_path / "signing_key.pem.checkpoint"
