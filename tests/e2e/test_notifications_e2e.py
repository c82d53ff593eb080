"""Notifications end to end with real processes: a
live HTTP server (the test's), a real `manage.py qcluster` on the same
PostgreSQL database, a real webhook receiver and a real SMTP server.

The scheduler is killed with SIGKILL twice over: its worker dies at a fail
point right after marking the first notice "sending" (before any network
call), then the whole cluster is killed (kill -9 of its process group) while
the goal is resolved. A new cluster delivers both notices to both channels,
exactly once each."""

import json
import os
import signal
import urllib.request
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from ledger.access import accounts
from ledger.models import Notification
from tests.helpers import manage_env, manage_processes, wait_for
from tests.receivers import receiving, smtp_receiving

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(autouse=True)
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("runs once, in the PostgreSQL half: a qcluster and the test's server "
                    "share one database")


def caller(base: str, username: str, role: str):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    user = get_user_model().objects.create(username=username)
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    token = accounts.issue_token(user)

    def call(path: str, body: dict) -> dict:
        request = urllib.request.Request(  # noqa: S310  (the live server's http URL)
            f"{base}/api/v1/{path}", method="POST", data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return json.loads(response.read())

    return call


def test_a_blocked_goal_tells_each_channel_once_across_scheduler_kills(live_server, settings,
                                                                      tmp_path):
    with receiving() as (hook_url, hooks), smtp_receiving() as (port, mails):
        notify = (f"{hook_url.replace('http://', 'json://')} mailto://127.0.0.1:{port}"
                  "?from=ledger@example.com&to=ops@example.com&mode=insecure")
        settings.WAKELEDGER_NOTIFY, settings.SITE_URL = notify, live_server.url
        env = manage_env(settings, tmp_path, SITE_URL=live_server.url,
                         WAKELEDGER_NOTIFY=notify, WAKELEDGER_FAILPOINTS_ENABLED="1",
                         WAKELEDGER_NOTIFY_TIMEOUT_SECONDS="5",
                         WAKELEDGER_OUTBOX_GRACE_SECONDS="0")
        with manage_processes(env, tmp_path) as processes:
            agent = caller(live_server.url, "agent-e2e", "agent")
            operator = caller(live_server.url, "operator-e2e", "operator")
            first = processes.spawn("qcluster", "qcluster",
                                    WAKELEDGER_FAILPOINT="notify.after_sending_mark")
            body = agent("goals", {"goal_key": "notify-e2e", "workspace": "/srv/e2e",
                                   "objective": "Ship it", "policy": {"lease_seconds": 300}})
            gid, lease = body["goal"]["id"], {"token": body["lease"]["token"],
                                              "generation": body["lease"]["generation"]}
            blocked = agent(f"goals/{gid}/approvals", {"lease": lease, "gate": "deploy"})
            assert blocked["reason"] == "BLOCKED_APPROVAL"
            # The first cluster's worker took the notice and died mid-send.
            wait_for(lambda: Notification.objects.filter(status="sending").exists(), 60,
                     what="a notice marked sending by the worker that then died")
            os.killpg(first.pid, signal.SIGKILL)  # kill -9 the whole scheduler
            first.wait(timeout=30)
            assert hooks == [] and mails == []
            # Resolved while no scheduler runs; its notices wait in the outbox.
            operator(f"goals/{gid}/approvals/deploy/resolve", {"decision": "approve"})
            # The dead sender's row may be sent again once its timeout passed.
            wait_for(lambda: not Notification.objects.filter(
                status="sending", sending_at__gt=timezone.now() - timedelta(seconds=6))
                .exists(), 30, what="the dead sender's timeout")
            processes.spawn("qcluster", "qcluster")
            wait_for(lambda: len(hooks) == 2 and len(mails) == 2, 60,
                     what="both notices on both channels, within a minute of the restart")
            wait_for(lambda: not Notification.objects.exclude(status="sent").exists(), 30,
                     what="every notice marked sent")
    titles = sorted(json.loads(body)["title"] for _, body in hooks)
    assert titles == ["Wake Ledger: goal notify-e2e needs a human (BLOCKED_APPROVAL)",
                      "Wake Ledger: goal notify-e2e no longer needs a human"]
    assert sorted(mail["Subject"] for mail in mails) == titles
    assert Notification.objects.count() == 4
    assert sorted(Notification.objects.values_list("attempts", flat=True)) == [1, 1, 1, 2]
