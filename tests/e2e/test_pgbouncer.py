"""Behind PgBouncer in transaction pooling, as most managed PostgreSQL
offerings run it: a real web server and a real qcluster, each connected
through a throwaway PgBouncer (Debian's 1.18, ``make tools``) that hands every
transaction whichever of its few server connections is free. A goal is
started, checkpointed under Idempotency-Keys (as the CLI sends them), paused
by a rate limit and woken by the scheduler at its reset, pulled and
finished; the ledger then verifies. Nothing that outlives a transaction on
a server connection (a named prepared statement, a held cursor) may be
relied on here (docs/deploy.md)."""

import json
import urllib.error
import urllib.request
import uuid

import pytest
from django.db import connection

from ledger.access import accounts
from ledger.eventstore import projection
from ledger.models import Event, Goal
from tests.helpers import manage_env, manage_processes, wait_for
from tests.postgres import free_port, pgbouncer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def bouncer():
    if connection.vendor != "postgresql":
        pytest.skip("PgBouncer sits in front of PostgreSQL: the PostgreSQL half of the suite")
    db = connection.settings_dict
    with pgbouncer(f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}") as url:
        if url is None:
            pytest.skip("no pgbouncer binary (Debian's package: `make tools` as root)")
        yield url


def test_a_goal_lives_its_life_through_a_transaction_pooling_pgbouncer(bouncer, settings,
                                                                        tmp_path):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    user = get_user_model().objects.create(username="pooled-agent")
    user.groups.add(Group.objects.get_or_create(name="agent")[0])
    token = accounts.issue_token(user)
    port = free_port()
    env = manage_env(settings, tmp_path, DATABASE_URL=bouncer,
                     WAKELEDGER_PG_TRANSACTION_POOLING="true", WAKELEDGER_Q_GUARD_CYCLE="1",
                     WAKELEDGER_RESET_MARGIN_SECONDS="1", ALLOWED_HOSTS="127.0.0.1")

    def call(path: str, body: dict) -> dict:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/v1/{path}", method="POST",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                     "Idempotency-Key": str(uuid.uuid4())})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            raise AssertionError(f"{path}: {error.code} {error.read()[:500]!r}") from None

    def up() -> bool:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/health", timeout=2)
        except OSError:
            return False
        return True

    with manage_processes(env, tmp_path) as processes:
        processes.spawn("web", "runserver", "--noreload", f"127.0.0.1:{port}")
        processes.spawn("qcluster", "qcluster")
        wait_for(up, 60, "the web server behind PgBouncer")
        started = call("goals", {"goal_key": "pooled", "workspace": "/srv/pooled",
                                 "objective": "Live behind a pooler",
                                 "next_actions": ["step one", "step two"]})
        gid = started["goal"]["id"]
        lease = {"token": started["lease"]["token"], "generation": 1}
        for pct in (10, 20, 30, 40, 50, 60):  # more than psycopg's prepare threshold
            call(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": f"at {pct}",
                                              "progress_pct": pct,
                                              "next_actions": ["step two"]})
        # A rate limit with a reset in a second: the scheduler's one-off wake.
        ran = call(f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                         "retry_after": "1",
                                         "error_text": "429 rate limit exceeded"})
        assert ran["status"] == "paused", ran
        wait_for(lambda: Goal.objects.get(pk=gid).state.get("ready"), 60,
                 "the scheduler's wake through PgBouncer")
        pulled = call(f"goals/{gid}/lease", {})
        assert pulled["acquired"], pulled
        resumed = {"token": pulled["lease"]["token"], "generation": pulled["lease"]["generation"]}
        call(f"goals/{gid}/checkpoints", {"lease": resumed, "current_step": "step two done",
                                          "progress_pct": 100})
        done = call(f"goals/{gid}/finish", {"lease": resumed, "status": "completed",
                                            "summary": "lived behind a pooler"})
    assert done["completion_state"] == "completed"
    claimed = Event.objects.get(goal_id=gid, kind="wake.claimed")
    assert (claimed.actor, claimed.data["outcome"], claimed.data["reason"]) == (
        "scheduler", "ready_for_pull", "rate_limit_reset")
    assert Event.objects.filter(goal_id=gid, kind="goal.completed").exists()
    assert [report.broken for report in projection.verify([gid])] == [None]
