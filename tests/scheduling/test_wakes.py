"""Wakes through the API and the scheduler's own tasks: watchdogs (internal as
django-q2 schedules, host with receipts), every claim outcome, the wake-loop
limit, the sweeper, blocking jobs, verified completion, and both dispatchers
against real local receivers."""

import hashlib
import hmac
import json
import sys
import time
from datetime import timedelta

import pytest
from django_q.models import Schedule

from api.digests import host_ref_digest
from ledger.models import Event, Goal
from ledger.services import wakes as claims
from scheduling import tasks, watchdogs
from scheduling.signatures import verify_signature
from tests.factories import COMPLETED, EXTREME_INSTANTS, kinds, lease_of
from tests.helpers import written_json
from tests.receivers import Gateway, openclaw_gateway, receiving

pytestmark = pytest.mark.django_db

SECRET = "test-webhook-secret"



def claims_of(gid: str) -> list[str]:
    return [data["outcome"] for data in Event.objects.filter(goal_id=gid, kind="wake.claimed")
            .order_by("seq").values_list("data", flat=True)]


# ------------------------------------------------------------------ internal watchdog


def test_internal_watchdog_is_one_django_q_schedule_and_idempotent(agent, started, clock):
    gid, lease = started(cadence_minutes=30)
    first = agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    assert first.status_code == 200, first.json()
    assert first.json()["watchdog"]["status"] == "live"
    assert first.json()["watchdog"]["backend"] == "internal"
    [schedule] = Schedule.objects.filter(name=watchdogs.schedule_name(gid))
    assert schedule.func == "scheduling.tasks.fire_watchdog" and schedule.minutes == 30
    assert schedule.next_run == clock() + timedelta(minutes=30)
    assert schedule.intended_date_kwarg == "intended_date"

    clock.advance(minutes=5)
    again = agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    assert again.json()["watchdog"] == first.json()["watchdog"]  # not retimed
    assert Schedule.objects.filter(name=watchdogs.schedule_name(gid)).count() == 1
    assert kinds(gid).count("wake.scheduled") == 1

    cancelled = agent.client.delete(f"/api/v1/goals/{gid}/watchdog", {"lease": lease},
                                    format="json")
    assert cancelled.json()["watchdog"]["status"] == "cancelled"
    assert not Schedule.objects.filter(name=watchdogs.schedule_name(gid)).exists()
    assert kinds(gid)[-1] == "receipt.recorded"


def test_internal_wake_resumes_a_vanished_agent_exactly_once(agent, started, clock):
    """Dispatcher "none" (the default) is pull: the wake makes the goal ready
    and hands a lease to nobody; the agent's own lease call takes it."""
    gid, lease = started(cadence_minutes=60)
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    clock.advance(minutes=6)  # the 300 s lease and its 60 s grace are over
    assert tasks.sweep_leases() == 1
    assert Goal.objects.get(pk=gid).status == "waiting"
    assert tasks.sweep_leases() == 0

    clock.advance(minutes=54)
    due = (clock() - timedelta(seconds=1)).isoformat()
    assert tasks.fire_watchdog(gid, intended_date=due) == "ready_for_pull"
    assert tasks.fire_watchdog(gid, intended_date=due) == "already_claimed"  # fired twice
    goal = Goal.objects.get(pk=gid)
    assert goal.status == "waiting" and goal.state["lease"] == {}
    assert goal.state["ready"]["reason"] == "timeout_recovery"
    assert claims_of(gid) == ["ready_for_pull"]
    assert "continuation.charged" not in kinds(gid)  # nothing charged until it is pulled

    # Minutes later, nothing happened to it: no INTERRUPTED_UNKNOWN for a
    # continuation that was never handed to anyone.
    clock.advance(minutes=15)
    tasks.sweep_leases()
    assert Goal.objects.get(pk=gid).status == "waiting"

    pulled = agent.post(f"goals/{gid}/lease", {})
    assert pulled.json()["acquired"] is True, pulled.json()
    goal = Goal.objects.get(pk=gid)
    assert goal.status == "running" and goal.state["lease"]["generation"] == 2
    assert goal.state["continuations_used"] == 1 and goal.state["ready"] == {}
    assert kinds(gid)[-2:] == ["continuation.charged", "lease.acquired"]

    # The old holder is fenced off.
    stale = agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "x",
                                                    "progress_pct": 5})
    assert stale.json()["code"] == "lease_lost"


def test_wake_outcomes_through_the_claim_endpoint(agent, started, clock):
    gid, lease = started(cadence_minutes=60, scheduler="host")
    prepared = agent.post(f"goals/{gid}/watchdog", {"lease": lease, "tzid": "Europe/Istanbul"})
    body = prepared.json()
    assert body["watchdog"]["status"] == "requested"
    assert body["next_required_action"] == "create_the_host_schedule_and_record_a_receipt"
    host = body["host_schedule"]
    assert host["occurrence"] == "interval" and host["interval_minutes"] == 60
    assert host["tzid"] == "Europe/Istanbul" and host["first_due_at"]
    assert host["destination"]["url"].endswith(f"/api/v1/goals/{gid}/claim")
    assert not Schedule.objects.filter(name=watchdogs.schedule_name(gid)).exists()

    def claim(occurrence: str) -> dict:
        answer = agent.post(f"goals/{gid}/claim", {"occurrence_id": occurrence})
        assert answer.status_code == 200, answer.json()
        return answer.json()

    # Not confirmed by a receipt yet: reconcile first, nothing recorded.
    before = kinds(gid)
    assert claim("run-0")["outcome"] == "receipt_required"
    assert kinds(gid) == before

    receipt = agent.post(f"goals/{gid}/watchdog/receipts", {
        "lease": lease, "status": "created", "host_ref": "cron-job-42",
        "due_at": host["first_due_at"], "runs_on": "local"})
    assert receipt.json()["watchdog"]["status"] == "live"
    stored = Goal.objects.get(pk=gid).state["watchdog"]
    # Keyed, not the plain SHA-256 a guess could be checked against.
    assert stored["host_ref_sha256"] == host_ref_digest("cron-job-42")
    assert stored["host_ref_sha256"] != hashlib.sha256(b"cron-job-42").hexdigest()
    assert "cron-job-42" not in json.dumps(Goal.objects.get(pk=gid).state)

    clock.advance(minutes=10)
    early = claim("run-1")
    assert early["outcome"] == "not_due" and early["retry_after_seconds"] == 3000

    clock.advance(minutes=50)
    agent.post(f"goals/{gid}/lease/heartbeat", {"lease": lease})
    busy = claim("run-2")
    assert busy["outcome"] == "worker_busy_noop" and busy["retry_after_seconds"] > 60
    assert busy["report"]["task_id"] == gid and busy["lease"] is None

    clock.advance(minutes=66)  # the holder vanished an hour ago
    granted = claim("run-3")
    assert granted["outcome"] == "recurring_acquired"
    assert granted["lease"]["generation"] == 2 and granted["lease"]["token"].startswith("wll_")
    assert granted["resume_packet"]["objective"] == "Fix the flaky checkout test"
    report = granted["report"]
    assert set(report) == {"task_id", "status", "progress_pct", "current_step",
                           "resumed_from_checkpoint", "next_wake_scheduled", "next_wake_at",
                           "notes"}
    assert report["resumed_from_checkpoint"] is not None and report["next_wake_scheduled"]

    again = claim("run-3")
    assert again["outcome"] == "already_claimed" and again["lease"] is None
    assert claims_of(gid) == ["not_due", "worker_busy_noop", "recurring_acquired"]


def test_create_uncertain_and_user_attested_deletion(agent, started, clock):
    gid, lease = started(scheduler="host")
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    uncertain = agent.post(f"goals/{gid}/watchdog/receipts",
                           {"lease": lease, "status": "create_uncertain"}).json()
    assert uncertain["watchdog"]["health"] == "degraded"
    assert uncertain["next_required_action"] == "reconcile_with_the_host_then_record_a_receipt"
    again = agent.post(f"goals/{gid}/watchdog", {"lease": lease}).json()
    assert "host_schedule" not in again  # never a blind second create
    assert kinds(gid).count("wake.scheduled") == 1
    assert Goal.objects.get(pk=gid).status == "running"  # degradation never blocks

    refused = agent.post(f"goals/{gid}/watchdog/receipts",
                         {"lease": lease, "status": "user_attested_deleted"})
    assert refused.status_code == 400
    gone = agent.post(f"goals/{gid}/watchdog/receipts",
                      {"lease": lease, "status": "user_attested_deleted",
                       "attested_by": "alice"}).json()
    assert gone["watchdog"]["status"] == "cancelled"


def test_create_failed_allows_one_retry(agent, started, clock):
    gid, lease = started(scheduler="host")
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    failed = agent.post(f"goals/{gid}/watchdog/receipts",
                        {"lease": lease, "status": "create_failed"}).json()
    assert failed["next_required_action"] == "retry_the_create_once"
    retry = agent.post(f"goals/{gid}/watchdog", {"lease": lease}).json()
    assert retry["watchdog"]["attempt"] == 2 and "host_schedule" in retry
    agent.post(f"goals/{gid}/watchdog/receipts", {"lease": lease, "status": "create_failed"})
    third = agent.post(f"goals/{gid}/watchdog", {"lease": lease}).json()
    assert third["watchdog"]["status"] == "failed" and "host_schedule" not in third
    assert kinds(gid).count("wake.scheduled") == 2


def test_cloud_needs_proof(agent, started, clock):
    gid, lease = started(scheduler="host")
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    claim = {"lease": lease, "status": "created", "host_ref": "t-1",
             "due_at": "2026-12-02T10:00:00Z", "runs_on": "cloud"}
    assert agent.post(f"goals/{gid}/watchdog/receipts", claim).status_code == 400
    ok = agent.post(f"goals/{gid}/watchdog/receipts", {**claim, "verified": True})
    assert ok.json()["watchdog"]["runs_on"] == "cloud"


# ------------------------------------------------------------------ completion


def test_finish_cancels_the_internal_watchdog_in_the_same_call(agent, started, clock):
    gid, lease = started()
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    done = agent.post(f"goals/{gid}/finish", {"lease": lease, **COMPLETED}).json()
    assert done["completion_state"] == "completed"
    assert not Schedule.objects.filter(name=watchdogs.schedule_name(gid)).exists()
    assert kinds(gid)[-2:] == ["receipt.recorded", "goal.completed"]


def test_finish_with_a_live_host_watchdog_waits_for_the_cancel_receipt(agent, started, clock):
    gid, lease = started(scheduler="host")
    spec = agent.post(f"goals/{gid}/watchdog", {"lease": lease}).json()["host_schedule"]
    agent.post(f"goals/{gid}/watchdog/receipts", {"lease": lease, "status": "created",
                                                  "host_ref": "t-9", "due_at":
                                                      spec["first_due_at"]})
    pending = agent.post(f"goals/{gid}/finish", {"lease": lease, **COMPLETED}).json()
    assert pending["completion_state"] == "pending_native_cleanup"
    assert pending["goal"]["status"] == "running"
    assert pending["goal"]["reason"] == "PENDING_NATIVE_CLEANUP"
    second = agent.post(f"goals/{gid}/finish", {"lease": lease, **COMPLETED}).json()
    assert second["completion_state"] == "pending_native_cleanup"
    receipt = agent.post(f"goals/{gid}/watchdog/receipts",
                         {"lease": lease, "status": "cancelled"}).json()
    assert receipt["completion_state"] == "completed"
    assert Goal.objects.get(pk=gid).status == "done"
    assert kinds(gid)[-4:] == ["goal.finish_requested", "wake.cancel_requested",
                               "receipt.recorded", "goal.completed"]
    # The evidence given with the finish is what the completion records.
    completion = Event.objects.filter(goal_id=gid, kind="goal.completed").get()
    assert completion.data["evidence"] == COMPLETED["evidence"]
    assert completion.data["summary"] == COMPLETED["summary"]


def test_a_finished_goal_whose_watchdog_still_fires(agent, started, clock):
    gid, lease = started(scheduler="host")
    spec = agent.post(f"goals/{gid}/watchdog", {"lease": lease}).json()["host_schedule"]
    agent.post(f"goals/{gid}/watchdog/receipts", {"lease": lease, "status": "created",
                                                  "host_ref": "t-9",
                                                  "due_at": spec["first_due_at"]})
    agent.post(f"goals/{gid}/finish", {"lease": lease, **COMPLETED})
    clock.advance(hours=2)
    # Finished but the host task still fires: cancel it, resume nothing.
    cleanup = agent.post(f"goals/{gid}/claim", {"occurrence_id": "late-1"}).json()
    assert cleanup["outcome"] == "terminal_cleanup_required" and cleanup["lease"] is None
    agent.post(f"goals/{gid}/watchdog/receipts", {"lease": lease, "status": "cancelled"})
    assert Goal.objects.get(pk=gid).status == "done"
    # A late fire of a host task that a user wrongly attested as deleted.
    assert agent.post(f"goals/{gid}/claim", {"occurrence_id": "late-2"}).json()["outcome"] \
        == "terminal_noop"
    # The receipt of a terminal goal needs no lease (there is none).
    disabled = agent.post(f"goals/{gid}/watchdog/receipts", {"status": "disabled"})
    assert disabled.status_code == 200


def test_wake_retries_exhausted_keeps_the_host_watchdog_for_after_recovery(agent, started,
                                                                         clock):
    gid, lease = started(scheduler="host", max_wake_retries=0)
    spec = agent.post(f"goals/{gid}/watchdog", {"lease": lease}).json()["host_schedule"]
    agent.post(f"goals/{gid}/watchdog/receipts", {"lease": lease, "status": "created",
                                                  "host_ref": "t-9",
                                                  "due_at": spec["first_due_at"]})
    clock.advance(hours=2)
    answer = agent.post(f"goals/{gid}/claim", {"occurrence_id": "o-1"}).json()
    assert answer["outcome"] == "terminal_cleanup_required"
    goal = Goal.objects.get(pk=gid)
    assert (goal.status, goal.reason) == ("blocked", "WAKE_RETRIES_EXHAUSTED")
    # Only its host can re-create a host schedule, so it stays; its fires on
    # the blocked goal resume nothing and use up nothing.
    assert goal.state["watchdog"]["status"] == "live"
    clock.advance(hours=1)
    assert agent.post(f"goals/{gid}/claim", {"occurrence_id": "o-2"}).json()["outcome"] == \
        "terminal_noop"


def test_a_stray_internal_schedule_of_a_finished_goal_is_deleted_by_its_wake(agent, started,
                                                                            clock):
    gid, lease = started()
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    # Blocked by the agent: the finish cancels the watchdog already.
    agent.post(f"goals/{gid}/finish", {"lease": lease, "status": "blocked"})
    assert not Schedule.objects.filter(name=watchdogs.schedule_name(gid)).exists()
    clock.advance(hours=1)
    assert tasks.fire_watchdog(gid, intended_date="x") == "terminal_noop"


# ------------------------------------------------------------------ wake loops, jobs


def test_no_wake_loop_past_max_wake_retries(agent, started, clock):
    gid, lease = started(max_wake_retries=2, cadence_minutes=60)
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    outcomes = []
    for hour in range(1, 4):
        clock.advance(hours=1)
        result = claims.claim(gid, source="internal", occurrence_id=f"h{hour}",
                              actor="scheduler", push=True)
        outcomes.append(result.outcome)
        if result.lease:  # the continuation heartbeats but never checkpoints
            agent.post(f"goals/{gid}/lease/heartbeat", {"lease": {
                "token": result.lease.token, "generation": result.lease.generation}})
    assert outcomes == ["recurring_acquired", "recurring_acquired", "terminal_cleanup_required"]
    goal = Goal.objects.get(pk=gid)
    assert (goal.status, goal.reason) == ("blocked", "WAKE_RETRIES_EXHAUSTED")
    assert not Schedule.objects.filter(name=watchdogs.schedule_name(gid)).exists()


def test_a_silent_continuation_is_interrupted_unknown_never_replayed(agent, started, clock):
    gid, lease = started(cadence_minutes=60)
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    agent.post(f"goals/{gid}/lease/release", {"lease": lease})
    clock.advance(hours=1)
    assert tasks.fire_watchdog(gid, intended_date=clock().isoformat()) == "ready_for_pull"
    # Its agent pulls the wake, then never heartbeats, checkpoints or reports.
    assert agent.post(f"goals/{gid}/lease", {}).json()["acquired"] is True
    clock.advance(minutes=6)
    tasks.sweep_leases()
    goal = Goal.objects.get(pk=gid)
    assert (goal.status, goal.reason) == ("blocked", "INTERRUPTED_UNKNOWN")
    # Blocking removed the internal watchdog at once (settle), so nothing
    # fires at a goal that needs a human.
    assert not Schedule.objects.filter(name=watchdogs.schedule_name(gid)).exists()
    clock.advance(hours=1)
    assert tasks.fire_watchdog(gid, intended_date="h2") == "terminal_noop"
    assert Goal.objects.get(pk=gid).status == "blocked"


def test_a_running_blocking_job_blocks_finish_while_its_holder_heartbeats(agent, started,
                                                                         clock):
    gid, lease = started()
    job = agent.post(f"goals/{gid}/jobs", {"lease": lease, "kind": "ci_run",
                                           "ref": "gh-run-7781"})
    assert job.status_code == 201
    job_id = job.json()["job"]["job_id"]
    for _ in range(12):  # an hour of CI; the holder heartbeats while it waits
        clock.advance(minutes=4)
        agent.post(f"goals/{gid}/lease/heartbeat", {"lease": lease})
        assert tasks.sweep_leases() == 0
    refused = agent.post(f"goals/{gid}/lease").json()
    assert refused["acquired"] is False and refused["next_required_action"] == "wait_for_holder"
    blocked = agent.post(f"goals/{gid}/finish", {"lease": lease, **COMPLETED})
    assert blocked.status_code == 409 and blocked.json()["code"] == "jobs_running"
    agent.post(f"goals/{gid}/jobs/{job_id}/status", {"lease": lease, "status": "succeeded",
                                                     "conclusion": "all green"})
    again = agent.post(f"goals/{gid}/jobs/{job_id}/status", {"lease": lease,
                                                             "status": "failed"})
    assert again.status_code == 409 and again.json()["code"] == "job_terminal"
    assert agent.post(f"goals/{gid}/finish", {"lease": lease, **COMPLETED}) \
        .json()["completion_state"] == "completed"


# ------------------------------------------------------------------ dispatchers


@pytest.fixture
def receiver():
    with receiving() as served:
        yield served


def vanish_and_wake(agent, gid: str, lease: dict, clock) -> str:
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    clock.advance(hours=1, minutes=1)
    return tasks.fire_watchdog(gid, intended_date="occ-1")


def test_webhook_dispatcher_posts_the_signed_resume_packet(agent, clock, receiver, settings):
    url, received = receiver
    settings.WAKELEDGER_DISPATCHERS = {"hook": {"type": "webhook", "url": url,
                                                "secret": SECRET, "timeout": 5}}
    body = agent.start(policy={"dispatch": "hook", "lease_seconds": 300}).json()
    gid = body["goal"]["id"]
    assert vanish_and_wake(agent, gid, lease_of(body), clock) == "recurring_acquired"
    [(headers, raw)] = received
    # Signed with a timestamp: t=<unix seconds>,v1=<HMAC of "<t>." + body>.
    signature = headers["X-Wakeledger-Signature"]
    stamp = int(signature.split(",")[0].removeprefix("t="))
    mac = hmac.new(SECRET.encode(), f"{stamp}.".encode() + raw, hashlib.sha256).hexdigest()
    assert signature == f"t={stamp},v1={mac}"
    assert verify_signature(SECRET, signature, raw)
    assert abs(time.time() - stamp) < 60
    assert headers["Idempotency-Key"] == f"internal:{gid}@occ-1"
    payload = json.loads(raw)
    assert payload["resume_packet"]["task_id"] == gid
    assert payload["lease"]["generation"] == 2
    # The dispatched lease works: the continuation checkpoints with it.
    resumed = agent.post(f"goals/{gid}/checkpoints", {
        "lease": {"token": payload["lease"]["token"], "generation": 2},
        "current_step": "resumed", "progress_pct": 10})
    assert resumed.status_code == 201
    [dispatched] = Event.objects.filter(goal_id=gid, kind="continuation.dispatched")
    assert dispatched.data == {"occurrence_id": f"internal:{gid}@occ-1", "dispatcher": "hook",
                               "ok": True, "detail": "HTTP 202"}
    assert payload["lease"]["token"] not in json.dumps(dispatched.data)


def test_openclaw_preset(agent, clock, settings):
    with openclaw_gateway(token="gw-token") as url:
        settings.WAKELEDGER_DISPATCHERS = {"claw": {"type": "webhook", "url": url,
                                                    "preset": "openclaw", "bearer": "gw-token"}}
        body = agent.start(policy={"dispatch": "claw"},
                           session={"session_key": "main:shop"}).json()
        vanish_and_wake(agent, body["goal"]["id"], lease_of(body), clock)
    assert Gateway.refused == []
    [(headers, payload)] = Gateway.accepted
    assert set(payload) == {"message", "name", "sessionKey", "idempotencyKey"}
    assert payload["sessionKey"] == "main:shop"
    assert "Resume Wake Ledger goal" in payload["message"]
    # No lease goes to the Gateway: the message says where to take it.
    assert "wll_" not in json.dumps(payload) and "WAKELEDGER_LEASE_TOKEN" not in payload["message"]
    assert f"goals/{body['goal']['id']}/lease" in payload["message"]
    assert headers["Authorization"] == "Bearer gw-token"


def test_command_dispatcher_runs_without_a_shell(agent, clock, settings, tmp_path):
    out = tmp_path / "woke.json"
    script = ("import json, os, sys; json.dump({'argv': sys.argv[1:], 'token': "
              "os.environ['WAKELEDGER_LEASE_TOKEN'], 'generation': "
              "os.environ['WAKELEDGER_LEASE_GENERATION']}, open(sys.argv[1], 'w'))")
    settings.WAKELEDGER_RUNS_DIR = tmp_path / "runs"
    settings.WAKELEDGER_DISPATCHERS = {"cmd": {"type": "command", "argv": [
        sys.executable, "-c", script, str(out), "{session_key}", "{goal_id}"]}}
    # Session keys are checked against a strict pattern (tests/scheduling/test_dispatch.py
    # shows hostile ones refused); a valid one is one argv element.
    body = agent.start(policy={"dispatch": "cmd"},
                       session={"session_key": "agent:main/shop@x"}).json()
    gid = body["goal"]["id"]
    assert vanish_and_wake(agent, gid, lease_of(body), clock) == "recurring_acquired"
    result = json.loads(written_json(out))
    assert result["argv"] == [str(out), "agent:main/shop@x", gid]
    assert result["generation"] == "2" and result["token"].startswith("wll_")
    assert list((tmp_path / "runs").glob(f"{gid}-*.log"))


def test_migrate_keeps_exactly_one_lease_sweeper_schedule(db):
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("migrate", verbosity=0)
    [sweeper] = Schedule.objects.filter(name=watchdogs.SWEEPER_NAME)
    assert sweeper.func == "scheduling.tasks.sweep_leases" and sweeper.minutes == 1


def test_an_unknown_dispatcher_is_refused_at_start(agent, clock):
    refused = agent.start(policy={"dispatch": "pager"})
    assert refused.status_code == 400
    assert "policy.dispatch" in refused.json()["errors"]


# ------------------------------------------------------------- a receipt's due_at at any instant


@pytest.mark.parametrize("due", [*EXTREME_INSTANTS, "1970-01-01T00:00:00+00:00",
                                 "9998-12-31T23:59:59-05:00"])
def test_a_receipt_due_at_any_instant_round_trips_or_is_refused(agent, clock, due):
    from datetime import datetime

    from tests.factories import start_goal
    from tests.helpers import staff

    gid, lease = start_goal(agent, cadence_minutes=60, scheduler="host")
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    answer = agent.post(f"goals/{gid}/watchdog/receipts", {
        "lease": lease, "status": "created", "host_ref": "42", "due_at": due,
        "runs_on": "local"})
    assert answer.status_code in (200, 400), answer.content
    if answer.status_code == 400:
        # Outside what the ledger records, or far from the slot the
        # server prepared: never an anchor a year (or eight thousand) away.
        assert answer.json()["code"] in ("time_out_of_range", "receipt_due_at_mismatch"), \
            answer.json()
    else:
        # Accepted: it reads back, in the API and in the admin's lists.
        assert agent.get(f"goals/{gid}").status_code == 200
        assert agent.get(f"goals/{gid}/events").status_code == 200
        watchdog = Goal.objects.get(pk=gid).state["watchdog"]
        assert datetime.fromisoformat(watchdog["due_at"] if "due_at" in watchdog
                                      else watchdog["anchor"]) == datetime.fromisoformat(due)
        auditor = staff("auditor-24", "auditor")
        for url in (f"/admin/ledger/goal/{gid}/timeline/", "/admin/ledger/goal/",
                    "/admin/ledger/event/"):
            assert auditor.get(url).status_code == 200, url
