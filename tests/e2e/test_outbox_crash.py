"""The dispatch outbox under real crashes (docs/design.md, "Uncertain attempts
are terminal"): a scheduler process is killed (SIGKILL) at each point of a push
wake, on SQLite and on PostgreSQL, and the ledger must end where that rule
says — no dispatch
lost, none sent twice without being recorded as uncertain, no free retry."""

import io
import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django_q.models import Schedule

from ledger.models import Event, Goal
from scheduling import tasks, watchdogs
from scheduling.models import Dispatch
from tests.receivers import receiving

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def hook(settings):
    with receiving() as (url, received):
        settings.WAKELEDGER_DISPATCHERS = {"hook": {"type": "webhook", "url": url,
                                                    "secret": "s", "timeout": 2}}
        settings.WAKELEDGER_RESET_MARGIN_SECONDS = 0
        settings.WAKELEDGER_OUTBOX_GRACE_SECONDS = 0
        settings.WAKELEDGER_STALE_GRACE_SECONDS = 1
        yield received


def child(settings, *args: str, failpoint: str = "") -> int:
    db = connection.settings_dict
    env = {**os.environ, "SECRET_KEY": settings.SECRET_KEY,
           "WAKELEDGER_DISPATCHERS": json.dumps(settings.WAKELEDGER_DISPATCHERS),
           "WAKELEDGER_FAILPOINT": failpoint}
    if connection.vendor == "sqlite":
        env["WAKELEDGER_TEST_SQLITE"] = str(db["NAME"])
        env.pop("DATABASE_URL", None)
    else:
        env["DATABASE_URL"] = (f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/"
                               f"{db['NAME']}")
    done = subprocess.run([sys.executable, "-m", "tests.crash_child", *args], cwd=ROOT, env=env,
                          capture_output=True, timeout=120)
    child.output = done.stdout.decode() + done.stderr.decode()  # for a failing assertion
    return done.returncode


def paused_goal(agent) -> tuple[str, Schedule]:
    body = agent.start(policy={"dispatch": "hook", "lease_seconds": 5}).json()
    gid = body["goal"]["id"]
    lease = {"token": body["lease"]["token"], "generation": body["lease"]["generation"]}
    agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "error", "retry_after": "1",
                                     "error_text": "429 rate limit exceeded"})
    reset = Schedule.objects.get(name=watchdogs.reset_schedule_name(gid))
    time.sleep(1.2)  # the reset wake is due
    return gid, reset


def clean(gid: str) -> None:
    call_command("ledger", "replay", "--check", stdout=io.StringIO())
    call_command("ledger", "verify", stdout=io.StringIO())
    call_command("ledger", "doctor", gid, stdout=io.StringIO())


def test_killed_after_the_claim_commits_the_pending_dispatch_is_sent_once(agent, hook,
                                                                          settings):
    gid, reset = paused_goal(agent)
    code = child(settings, "fire", gid, reset.next_run.isoformat(), "reset",
                 failpoint="claim.after_commit")
    assert code == -signal.SIGKILL
    assert Dispatch.objects.get(goal_id=gid).status == Dispatch.PENDING
    assert hook == []  # nothing went out
    tasks.sweep_leases()  # the next sweep sends what a dead sender left pending
    assert len(hook) == 1
    assert Dispatch.objects.get(goal_id=gid).status == Dispatch.SENT
    assert Event.objects.filter(goal_id=gid, kind="continuation.charged").count() == 1
    tasks.sweep_leases()
    assert len(hook) == 1  # never twice
    clean(gid)


@pytest.mark.parametrize("point, sent", [("outbox.after_sending_mark", 0),
                                         ("outbox.after_send", 1)])
def test_killed_mid_dispatch_is_uncertain_never_resent(agent, hook, settings, point, sent):
    gid, reset = paused_goal(agent)
    assert child(settings, "fire", gid, reset.next_run.isoformat(), "reset",
                 failpoint=point) == -signal.SIGKILL
    assert Dispatch.objects.get(goal_id=gid).status == Dispatch.SENDING
    assert len(hook) == sent
    time.sleep(2.5)  # past the dispatcher's 2 s timeout (grace 0)
    tasks.sweep_leases()
    assert Dispatch.objects.get(goal_id=gid).status == Dispatch.UNCERTAIN
    dispatched = Event.objects.get(goal_id=gid, kind="continuation.dispatched")
    assert dispatched.data["uncertain"] is True
    assert len(hook) == sent  # never sent again
    # No sign of life from the continuation: an uncertain attempt, never a replay.
    goal = Goal.objects.get(pk=gid)
    time.sleep(max(0.0, (goal.lease_expires_at - datetime.now(UTC)).total_seconds()) + 1.5)
    tasks.sweep_leases()
    goal = Goal.objects.get(pk=gid)
    assert (goal.status, goal.reason) == ("blocked", "INTERRUPTED_UNKNOWN")
    assert goal.state["continuations_used"] == 1  # no free retry
    clean(gid)


def test_a_sweeper_killed_after_an_expiry_leaves_a_whole_command(agent, hook, settings):
    body = agent.start(policy={"lease_seconds": 5}).json()
    gid = body["goal"]["id"]
    time.sleep(6.5)  # the 5 s lease and its 1 s grace are over
    assert child(settings, "sweep", failpoint="sweeper.after_expire") in (-signal.SIGKILL, 0)
    goal = Goal.objects.get(pk=gid)
    kinds = list(Event.objects.filter(goal_id=gid).order_by("seq")
                 .values_list("kind", flat=True))
    assert goal.version == len(kinds)  # the projection and the events agree
    assert goal.status == "waiting" and goal.state["lease"] == {}
    clean(gid)


def test_killed_after_a_checkpoint_commits_the_retry_with_its_key_records_it_once(agent,
                                                                                  settings):
    body = agent.start().json()
    gid = body["goal"]["id"]
    lease = {"token": body["lease"]["token"], "generation": body["lease"]["generation"]}
    step = {"lease": lease, "current_step": "migrated", "progress_pct": 40}
    code = child(settings, "post", f"/api/v1/goals/{gid}/checkpoints", json.dumps(step),
                 agent.token, "cp-1", failpoint="api.after_commit")
    assert code == -signal.SIGKILL, child.output  # the worker died before it could answer
    assert Event.objects.filter(goal_id=gid, kind="checkpoint.recorded").count() == 1
    retried = agent.post(f"goals/{gid}/checkpoints", step, key="cp-1")
    assert retried.status_code == 201 and retried["Idempotent-Replayed"] == "true"
    assert Event.objects.filter(goal_id=gid, kind="checkpoint.recorded").count() == 1
    clean(gid)


def test_killed_inside_replay_fix_leaves_the_projection_to_the_next_fix(agent, settings):
    body = agent.start().json()
    gid = body["goal"]["id"]
    Goal.objects.filter(pk=gid).update(status="blocked", reason="UNCLASSIFIED")  # drifted
    assert child(settings, "replay-fix", failpoint="replay.before_commit") == -signal.SIGKILL
    assert Goal.objects.get(pk=gid).status == "blocked"  # the killed fix wrote nothing
    with pytest.raises(CommandError, match="differ"):
        call_command("ledger", "replay", "--check", stdout=io.StringIO())
    call_command("ledger", "replay", "--fix", stdout=io.StringIO())
    assert Goal.objects.get(pk=gid).status == "running"
    clean(gid)
