"""End to end with real processes on PostgreSQL: a live HTTP server (the
test's), a real `manage.py qcluster` subprocess on the same database, and a
local webhook receiver. Nothing of ours is mocked; time is real, shortened
through settings (a cadence "minute" of 1 s, a 1 s stale grace)."""

import json
import time
import urllib.request
from datetime import datetime

import pytest
from django.db import connection
from django_q.models import Schedule, Task
from django_q.tasks import async_task

from ledger.access import accounts
from ledger.models import Event, Goal
from scheduling import watchdogs
from scheduling.signatures import verify_signature
from tests.helpers import manage_env, manage_processes, wait_for
from tests.receivers import Receiver, receiving

SECRET = "e2e-secret"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
]


@pytest.fixture(autouse=True)
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("the real-process end-to-end tests run in the PostgreSQL half of the suite")


@pytest.fixture
def receiver():
    with receiving() as (url, _received):
        yield url


@pytest.fixture
def fast(settings, receiver, live_server):
    """The same short timings in this process (the web side) and the cluster."""
    dispatchers = {"hook": {"type": "webhook", "url": receiver, "secret": SECRET,
                            "timeout": 5}}
    settings.WAKELEDGER_CADENCE_UNIT_SECONDS = 1
    settings.WAKELEDGER_STALE_GRACE_SECONDS = 1
    settings.WAKELEDGER_RESET_MARGIN_SECONDS = 1
    settings.WAKELEDGER_DISPATCHERS = dispatchers
    settings.SITE_URL = live_server.url
    return {
        "SITE_URL": live_server.url,
        "WAKELEDGER_CADENCE_UNIT_SECONDS": "1",
        "WAKELEDGER_STALE_GRACE_SECONDS": "1",
        "WAKELEDGER_RESET_MARGIN_SECONDS": "1",
        "WAKELEDGER_DISPATCHERS": json.dumps(dispatchers),
        "WAKELEDGER_Q_WORKERS": "2",
    }


@pytest.fixture
def cluster(fast, settings, tmp_path):
    """Start `manage.py qcluster` with extra environment; stopped after the test."""
    with manage_processes(manage_env(settings, tmp_path, **fast), tmp_path) as processes:
        yield lambda **extra: processes.spawn("qcluster", "qcluster", **extra)


@pytest.fixture
def agent_http(live_server, transactional_db):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    user = get_user_model().objects.create(username="e2e-agent")
    user.groups.add(Group.objects.get_or_create(name="agent")[0])
    token = accounts.issue_token(user)

    def call(method: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(  # noqa: S310  (the live server's http URL)
            f"{live_server.url}/api/v1/{path}", method=method,
            data=json.dumps(body or {}).encode() if method != "GET" else None,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return json.loads(response.read())

    return call


def test_a_vanished_agent_is_resumed_by_the_real_scheduler(agent_http, cluster, tmp_path):
    started = agent_http("POST", "goals", {
        "goal_key": "e2e-1", "workspace": "/srv/e2e", "objective": "Survive a crash",
        "next_actions": ["step one", "step two"],
        "policy": {"lease_seconds": 5, "cadence_minutes": 20, "dispatch": "hook"}})
    gid = started["goal"]["id"]
    lease = {"token": started["lease"]["token"], "generation": 1}
    agent_http("POST", f"goals/{gid}/checkpoints", {
        "lease": lease, "current_step": "step one done", "progress_pct": 30,
        "next_actions": ["step two"]})
    watchdog = agent_http("POST", f"goals/{gid}/watchdog", {"lease": lease})
    assert watchdog["watchdog"]["status"] == "live"
    assert Schedule.objects.filter(name=watchdogs.schedule_name(gid)).count() == 1
    # The agent vanishes here. Its 5 s lease and 1 s grace run out first; the
    # cluster (checking schedules at start-up, then every 30 s) sweeps the
    # lease at once and fires the 20 s watchdog at its next look.
    time.sleep(6.5)
    cluster(WAKELEDGER_Q_GUARD_CYCLE="30")

    wait_for(lambda: Goal.objects.get(pk=gid).status == "waiting", 30, "the sweeper")
    headers, raw = wait_for(lambda: Receiver.received and Receiver.received[0], 75,
                            "the webhook with the resume packet")
    packet = json.loads(raw)
    assert packet["resume_packet"]["next_actions"] == ["step two"]
    assert packet["resume_packet"]["checkpoint"]["current_step"] == "step one done"
    assert verify_signature(SECRET, headers["X-Wakeledger-Signature"], raw)
    resumed = {"token": packet["lease"]["token"], "generation": packet["lease"]["generation"]}
    assert resumed["generation"] == 2

    # The "agent" resumes with the dispatched lease, checkpoints and finishes.
    agent_http("POST", f"goals/{gid}/checkpoints", {
        "lease": resumed, "current_step": "step two done", "progress_pct": 100})
    done = agent_http("POST", f"goals/{gid}/finish", {"lease": resumed, "status": "completed",
                                                     "summary": "survived"})
    assert done["completion_state"] == "completed"
    assert not Schedule.objects.filter(name=watchdogs.schedule_name(gid)).exists()

    history = list(Event.objects.filter(goal_id=gid).order_by("seq")
                   .values_list("kind", "actor"))
    kinds = [kind for kind, _ in history]
    assert ("lease.expired", "scheduler") in history
    assert kinds.index("lease.expired") < kinds.index("wake.claimed")
    claimed = Event.objects.get(goal_id=gid, kind="wake.claimed")
    assert claimed.data["outcome"] == "recurring_acquired"
    assert claimed.data["reason"] == "timeout_recovery"
    dispatched = Event.objects.get(goal_id=gid, kind="continuation.dispatched")
    assert dispatched.data["ok"] is True
    assert kinds[-2:] == ["receipt.recorded", "goal.completed"]


def test_one_occurrence_fired_twice_is_claimed_once(agent_http, cluster):
    started = agent_http("POST", "goals", {
        "goal_key": "e2e-2", "workspace": "/srv/e2e-2", "objective": "Race the scheduler"})
    gid = started["goal"]["id"]
    lease = {"token": started["lease"]["token"], "generation": 1}
    agent_http("POST", f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                            "retry_after": "1",
                                            "error_text": "429 rate limit exceeded"})
    reset = Schedule.objects.get(name=watchdogs.reset_schedule_name(gid))
    time.sleep(max(0.0, (reset.next_run - datetime.now(reset.next_run.tzinfo))
                   .total_seconds()) + 0.5)  # the reset wake is due
    # The same occurrence, twice, as two clusters or a retry would deliver it;
    # two workers take them at once.
    for _ in range(2):
        async_task("scheduling.tasks.fire_watchdog", gid,
                   intended_date=reset.next_run.isoformat(), kind="reset", task_name=None)
    cluster()
    results = wait_for(
        lambda: (lambda rows: rows if len(rows) == 2 else None)(
            [task.result for task in Task.objects.filter(func="scheduling.tasks.fire_watchdog")]),
        60, "both tasks")
    # Dispatcher "none": the one claim makes the goal ready for its agent.
    assert sorted(results) == ["already_claimed", "ready_for_pull"]
    goal = Goal.objects.get(pk=gid)
    assert goal.state["ready"] and goal.state["lease"] == {}
    assert Event.objects.filter(goal_id=gid, kind="wake.claimed").count() == 1
    assert Event.objects.filter(goal_id=gid, kind__startswith="lease.acquired").count() == 1


def test_a_rate_limited_goal_wakes_after_the_reset(agent_http, cluster):
    started = agent_http("POST", "goals", {
        "goal_key": "e2e-3", "workspace": "/srv/e2e-3", "objective": "Outlast a rate limit",
        "next_actions": ["call the model again"],
        "policy": {"lease_seconds": 60, "dispatch": "hook"}})
    gid = started["goal"]["id"]
    lease = {"token": started["lease"]["token"], "generation": 1}
    # The cluster looks at its schedules now and every 30 s after.
    cluster(WAKELEDGER_Q_GUARD_CYCLE="30")
    time.sleep(2)
    answer = agent_http("POST", f"goals/{gid}/runs", {
        "lease": lease, "outcome": "error", "retry_after": "10",
        "error_text": "HTTP 429 Too Many Requests: rate limit exceeded"})
    assert answer["classification"] == "rate_limit" and answer["status"] == "paused"
    assert Schedule.objects.filter(name=watchdogs.reset_schedule_name(gid)).count() == 1

    _headers, raw = wait_for(lambda: Receiver.received and Receiver.received[0], 75,
                             "the one-off wake after the reset")
    packet = json.loads(raw)
    resumed = {"token": packet["lease"]["token"], "generation": packet["lease"]["generation"]}
    claimed = Event.objects.get(goal_id=gid, kind="wake.claimed")
    assert claimed.data["reason"] == "rate_limit_reset"
    paused_until = Event.objects.get(goal_id=gid, kind="goal.paused").data["until"]
    assert claimed.recorded_at >= datetime.fromisoformat(paused_until)  # after the reset
    charge = Event.objects.get(goal_id=gid, kind="continuation.charged")
    assert (charge.data["attempt"], charge.data["max"]) == (1, 3)
    # The charge is recorded before the dispatch.
    dispatched = wait_for(
        lambda: Event.objects.filter(goal_id=gid, kind="continuation.dispatched").first(), 20,
        "the dispatch record")
    assert charge.seq < dispatched.seq and dispatched.data["ok"] is True

    agent_http("POST", f"goals/{gid}/checkpoints", {
        "lease": resumed, "current_step": "called again", "progress_pct": 100})
    done = agent_http("POST", f"goals/{gid}/finish", {"lease": resumed, "status": "completed",
                                                     "summary": "called again, answered"})
    assert done["completion_state"] == "completed"
    assert not Schedule.objects.filter(name=watchdogs.reset_schedule_name(gid)).exists()


def pull(agent_http, gid: str, timeout: float) -> dict:
    """The agent polls as the skill document says: take the lease; when it is
    refused, wait what the answer says (at most a few seconds) and try again."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = agent_http("POST", f"goals/{gid}/lease")
        if answer.get("acquired"):
            return answer
        time.sleep(min(5, answer.get("retry_after_seconds") or 1))
    pytest.fail(f"the agent could not pull goal {gid} within {timeout} s")


@pytest.mark.parametrize("agent_first", [False, True], ids=["wake-first", "agent-first"])
def test_default_settings_a_rate_limited_goal_is_pulled_after_its_reset(agent_http, cluster,
                                                                         agent_first):
    """A rate-limited goal resumes after its reset, end to end with the defaults
    (dispatcher none): no operator, the agent resumes from its checkpoint, charged once."""
    started = agent_http("POST", "goals", {
        "goal_key": "e2e-pull", "workspace": "/srv/e2e-pull", "objective": "Outlast a limit",
        "next_actions": ["call the model again"], "policy": {"lease_seconds": 60}})
    gid = started["goal"]["id"]
    lease = {"token": started["lease"]["token"], "generation": 1}
    agent_http("POST", f"goals/{gid}/checkpoints", {
        "lease": lease, "current_step": "half way", "progress_pct": 50,
        "next_actions": ["call the model again"]})
    if not agent_first:
        cluster(WAKELEDGER_Q_GUARD_CYCLE="30")  # looks now and every 30 s
        time.sleep(2)
    answer = agent_http("POST", f"goals/{gid}/runs", {
        "lease": lease, "outcome": "error", "retry_after": "10",
        "error_text": "HTTP 429 Too Many Requests: rate limit exceeded"})
    assert answer["status"] == "paused"
    if agent_first:
        pulled = pull(agent_http, gid, 30)  # the reset passes; no scheduler runs yet
        cluster(WAKELEDGER_Q_GUARD_CYCLE="30")
        time.sleep(5)  # the cluster's first look: the pulled wake's row is gone
    else:
        wait_for(lambda: Event.objects.filter(goal_id=gid, kind="wake.claimed").exists(), 75,
                 "the scheduler's wake at the reset")
        claimed = Event.objects.get(goal_id=gid, kind="wake.claimed")
        assert (claimed.actor, claimed.data["outcome"]) == ("scheduler", "ready_for_pull")
        pulled = pull(agent_http, gid, 30)
    assert pulled["resumed"]["reason"] == "rate_limit_reset" and pulled["resumed"]["charged"]
    assert pulled["resume_packet"]["checkpoint"]["current_step"] == "half way"
    resumed = {"token": pulled["lease"]["token"], "generation": pulled["lease"]["generation"]}
    agent_http("POST", f"goals/{gid}/checkpoints", {
        "lease": resumed, "current_step": "called again", "progress_pct": 100})
    done = agent_http("POST", f"goals/{gid}/finish", {"lease": resumed, "status": "completed",
                                                     "summary": "outlasted it"})
    assert done["completion_state"] == "completed"
    assert Event.objects.filter(goal_id=gid, kind="continuation.charged").count() == 1
    assert not Event.objects.filter(goal_id=gid, kind="goal.blocked").exists()
    assert not Schedule.objects.filter(name__endswith=gid).exists()


def test_requested_wake_and_dependency_ready_on_a_real_cluster(agent_http, cluster,
                                                               live_server):
    """Wakes the agent asks for, end to end: a release with wake {in_seconds: 60} is resumed
    about a minute later (timeout_recovery); a job reported by its notify
    token wakes its waiting goal at once (dependency_ready)."""
    first = agent_http("POST", "goals", {
        "goal_key": "e2e-wake", "workspace": "/srv/e2e-wake", "objective": "Wake me later",
        "next_actions": ["continue"]})
    gid = first["goal"]["id"]
    lease = {"token": first["lease"]["token"], "generation": 1}
    released = agent_http("POST", f"goals/{gid}/checkpoints", {
        "lease": lease, "current_step": "flushed", "progress_pct": 30, "release_lease": True,
        "wake": {"in_seconds": 60}})
    asked = time.monotonic()
    assert released["requested_wake"]["reason"] == "timeout_recovery"

    second = agent_http("POST", "goals", {
        "goal_key": "e2e-ci", "workspace": "/srv/e2e-ci", "objective": "Wait for CI"})
    gid2 = second["goal"]["id"]
    lease2 = {"token": second["lease"]["token"], "generation": 1}
    tracked = agent_http("POST", f"goals/{gid2}/jobs", {
        "lease": lease2, "kind": "ci_run", "ref": "run-9", "notify": True})
    agent_http("POST", f"goals/{gid2}/lease/release", {"lease": lease2})
    cluster(WAKELEDGER_Q_GUARD_CYCLE="30")
    time.sleep(3)
    # The CI system's last step: curl with the job's own token.
    request = urllib.request.Request(  # noqa: S310 (the live server)
        f"{live_server.url}/api/v1/jobs/{tracked['job']['job_id']}/status", method="POST",
        data=json.dumps({"status": "succeeded", "conclusion": "green"}).encode(),
        headers={"Authorization": f"Bearer {tracked['notify_token']}",
                 "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
        assert answer.status == 200

    def woken(goal_id: str):
        return Event.objects.filter(goal_id=goal_id, kind="wake.claimed",
                                    data__outcome="ready_for_pull").first()

    dependency = wait_for(lambda: woken(gid2), 45, "the dependency_ready wake")
    assert dependency.data["reason"] == "dependency_ready"  # within wait_for's 45 s
    pulled = pull(agent_http, gid2, 20)
    assert pulled["resumed"]["reason"] == "dependency_ready"
    assert pulled["resume_packet"]["jobs"][0]["status"] == "succeeded"

    requested = wait_for(lambda: woken(gid), 100, "the requested wake")
    assert requested.data["reason"] == "timeout_recovery"
    # Not before the minute asked for (a lower bound is behaviour: the wake is
    # not early); the upper one is wait_for's deadline above.
    assert time.monotonic() - asked >= 55
    pulled = pull(agent_http, gid, 20)
    assert pulled["resumed"]["reason"] == "timeout_recovery"
    # Never a second recurring watchdog for either goal.
    for goal_id in (gid, gid2):
        assert Schedule.objects.filter(name=watchdogs.schedule_name(goal_id)).count() <= 1


def test_a_request_id_leads_from_the_request_to_the_dispatch_in_the_cluster(
        agent_http, cluster, live_server, tmp_path):
    """Structured logs (docs/metrics.md): an operator's wake now over HTTP,
    with its own X-Request-ID, writes the push wake's outbox row; the real
    cluster's sweeper sends it at start-up, and its JSON log line about the
    dispatch carries the request's id."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from scheduling.models import Dispatch

    started = agent_http("POST", "goals", {
        "goal_key": "e2e-rid", "workspace": "/srv/e2e-rid", "objective": "Be followed",
        "policy": {"lease_seconds": 60, "dispatch": "hook"}})
    gid = started["goal"]["id"]
    agent_http("POST", f"goals/{gid}/lease/release",
               {"lease": {"token": started["lease"]["token"], "generation": 1}})
    operator = get_user_model().objects.create(username="e2e-operator")
    operator.groups.add(Group.objects.get_or_create(name="operator")[0])
    request = urllib.request.Request(  # noqa: S310  (the live server's http URL)
        f"{live_server.url}/api/v1/goals/{gid}/wake", method="POST",
        data=json.dumps({"reason": "follow this request"}).encode(),
        headers={"Authorization": f"Bearer {accounts.issue_token(operator)}",
                 "Content-Type": "application/json", "X-Request-ID": "req-e2e-follow-1"})
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        assert response.headers["X-Request-ID"] == "req-e2e-follow-1"
    assert Dispatch.objects.get(goal_id=gid).request_id == "req-e2e-follow-1"

    cluster(WAKELEDGER_LOG_FORMAT="json", WAKELEDGER_Q_GUARD_CYCLE="30")  # sweeps at start-up
    wait_for(lambda: Dispatch.objects.get(goal_id=gid).status == Dispatch.SENT, 60,
             "the cluster's sweeper to send the dispatch")
    log = tmp_path / "qcluster-0.log"

    def dispatch_lines() -> list[dict]:
        lines = [json.loads(line) for line in log.read_text().splitlines()
                 if line.startswith("{")]
        return [line for line in lines if line.get("request_id") == "req-e2e-follow-1"]

    lines = wait_for(dispatch_lines, 30, "the dispatch's JSON log line")
    assert any(line["logger"] == "scheduling.outbox" and ": sent (" in line["message"]
               and gid in line["message"] for line in lines), lines
