"""Wakes the agent asks for: "wake me in N minutes" at the turn
boundary, and a wake the moment a blocking job's notify token reports its end."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django_q.models import Schedule

from ledger.models import Event, Goal
from scheduling import watchdogs
from tests.factories import lease_of
from tests.scheduling.test_liveness import fire_schedule

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(agent, clock):
    def start(**policy):
        body = agent.start(policy={"lease_seconds": 300, **policy}).json()
        return body["goal"]["id"], lease_of(body)

    return start


def notify(_client, job_id: str, token: str, **body):
    """What a CI step's curl does: its own client, only the job's token."""
    from rest_framework.test import APIClient

    return APIClient().post(f"/api/v1/jobs/{job_id}/status", body, format="json",
                            HTTP_AUTHORIZATION=f"Bearer {token}")


# ------------------------------------------------------------ a wake at the turn boundary


def test_release_with_a_wake_in_60_seconds_resumes_the_goal_then(agent, running, clock):
    gid, lease = running(cadence_minutes=60)
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    anchor = Goal.objects.get(pk=gid).state["watchdog"]["anchor"]
    answer = agent.post(f"goals/{gid}/checkpoints", {
        "lease": lease, "current_step": "flushed before the timeout", "progress_pct": 40,
        "release_lease": True, "wake": {"in_seconds": 60}})
    assert answer.status_code == 201, answer.json()
    assert answer.json()["requested_wake"] == {"due_at": "2026-12-02T09:01:00.000000Z",
                                               "reason": "timeout_recovery"}
    scheduled = Event.objects.filter(goal_id=gid, kind="wake.scheduled").last()
    assert scheduled.data["kind"] == "requested" and scheduled.data["reason"] == \
        "timeout_recovery"
    one_off = Schedule.objects.get(name=watchdogs.requested_schedule_name(gid))
    assert one_off.schedule_type == Schedule.ONCE and one_off.next_run == clock() + \
        timedelta(seconds=60)
    # One watchdog per goal: the recurring one stays as it was.
    assert Schedule.objects.filter(name=watchdogs.schedule_name(gid)).count() == 1
    assert Goal.objects.get(pk=gid).state["watchdog"]["anchor"] == anchor
    assert Goal.objects.get(pk=gid).next_wake_at == clock() + timedelta(seconds=60)

    clock.advance(seconds=61)
    assert fire_schedule(watchdogs.requested_schedule_name(gid), clock) == "ready_for_pull"
    pulled = agent.post(f"goals/{gid}/lease", {}).json()
    assert pulled["resumed"]["reason"] == "timeout_recovery"
    assert not pulled["resumed"]["charged"]  # a clean end of turn: not a recovery
    assert Schedule.objects.filter(name__startswith="wakeledger-watchdog-").count() == 1


def test_a_later_request_replaces_the_pending_one_and_bounds_hold(agent, running, clock):
    gid, lease = running(cadence_minutes=30)
    for bad in ({"in_seconds": 30}, {"in_seconds": 31 * 60},
                {"in_seconds": 120, "at": "2026-12-02T09:05:00Z"}, {"reason": "later"}):
        refused = agent.post(f"goals/{gid}/lease/release", {"lease": lease, "wake": bad})
        assert refused.status_code == 400, bad
        assert refused.json()["code"] == "validation_error"
    alone = agent.post(f"goals/{gid}/checkpoints", {
        "lease": lease, "current_step": "x", "progress_pct": 1, "wake": {"in_seconds": 90}})
    assert alone.status_code == 400  # a wake only at a turn boundary
    first = agent.post(f"goals/{gid}/lease/release", {
        "lease": lease, "wake": {"at": "2026-12-02T09:10:00+00:00",
                                 "reason": "dependency_ready"}}).json()
    assert first["requested_wake"]["due_at"] == "2026-12-02T09:10:00.000000Z"
    lease = lease_of(agent.post(f"goals/{gid}/lease", {}).json())
    second = agent.post(f"goals/{gid}/lease/release", {
        "lease": lease, "wake": {"in_seconds": 300, "reason": "scheduled_progress"}}).json()
    assert second["requested_wake"] == {"due_at": "2026-12-02T09:05:00.000000Z",
                                        "reason": "scheduled_progress"}
    assert Schedule.objects.filter(name=watchdogs.requested_schedule_name(gid)).count() == 1


def test_a_host_goal_is_told_the_one_off_task_to_create(agent, running, clock):
    gid, lease = running(scheduler="host")
    answer = agent.post(f"goals/{gid}/lease/release", {
        "lease": lease, "wake": {"in_seconds": 120}}).json()
    one_off = answer["requested_wake"]["host_one_off"]
    assert one_off["occurrence"] == "once" and one_off["run_at"] == answer["requested_wake"][
        "due_at"]
    assert one_off["destination"]["url"].endswith(f"/api/v1/goals/{gid}/claim")
    assert not Schedule.objects.filter(name__endswith=gid).exists()


# ------------------------------------------------------------ a dependency is ready


def test_a_job_reported_by_its_notify_token_wakes_its_waiting_goal(agent, running, clock):
    gid, lease = running(cadence_minutes=60)
    tracked = agent.post(f"goals/{gid}/jobs", {
        "lease": lease, "kind": "ci_run", "ref": "gh-run-42", "notify": True,
        "link": "https://github.com/acme/shop/actions/runs/42"})
    assert tracked.status_code == 201
    token, job = tracked.json()["notify_token"], tracked.json()["job"]
    assert token.startswith("wlj_") and "notify_sha256" not in job
    agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "pushed",
                                            "progress_pct": 60, "release_lease": True})
    clock.advance(minutes=7)
    reported = notify(agent.client, job["job_id"], token, status="succeeded",
                      conclusion="412 checks passed")
    assert reported.status_code == 200, reported.json()
    updated = Event.objects.filter(goal_id=gid, kind="job.updated").get()
    assert updated.data["reported_by"] == "notify_token" and updated.actor.startswith("job:")
    scheduled = Event.objects.filter(goal_id=gid, kind="wake.scheduled").last()
    assert (scheduled.data["kind"], scheduled.data["reason"]) == ("requested",
                                                                  "dependency_ready")
    assert Schedule.objects.get(name=watchdogs.requested_schedule_name(gid)).next_run == clock()
    assert fire_schedule(watchdogs.requested_schedule_name(gid), clock) == "ready_for_pull"
    pulled = agent.post(f"goals/{gid}/lease", {}).json()
    assert pulled["resumed"]["reason"] == "dependency_ready"
    [named] = pulled["resume_packet"]["jobs"]
    assert (named["ref"], named["status"], named["link"]) == (
        "gh-run-42", "succeeded", "https://github.com/acme/shop/actions/runs/42")
    # The same report again changes nothing; another status is refused.
    assert notify(agent.client, job["job_id"], token, status="succeeded").status_code == 200
    assert Event.objects.filter(goal_id=gid, kind="job.updated").count() == 1
    assert notify(agent.client, job["job_id"], token, status="failed").json()["code"] == \
        "job_terminal"
    # Shown once, stored nowhere.
    with connection.cursor() as cursor:
        for table in ("ledger_event", "ledger_goal", "api_idempotencyrecord"):
            cursor.execute(f"SELECT * FROM {table}")
            assert token not in json.dumps(cursor.fetchall(), default=str)


def test_a_notify_token_touches_only_its_own_job(agent, other_agent, auditor, operator,
                                                 running, clock):
    gid, lease = running()
    first = agent.post(f"goals/{gid}/jobs", {"lease": lease, "kind": "ci", "ref": "a",
                                             "notify": True}).json()
    second = agent.post(f"goals/{gid}/jobs", {"lease": lease, "kind": "ci", "ref": "b",
                                              "notify": True}).json()
    other = other_agent.start(goal_key="other", workspace="/srv/other").json()
    other_job = other_agent.post(f"goals/{other['goal']['id']}/jobs", {
        "lease": lease_of(other), "kind": "ci", "ref": "c", "notify": True}).json()
    # Job a's token on job b, on the other goal's job, and the API's own tokens.
    assert notify(agent.client, second["job"]["job_id"], first["notify_token"],
                  status="succeeded").status_code == 404
    assert notify(agent.client, other_job["job"]["job_id"], first["notify_token"],
                  status="succeeded").status_code == 404
    for caller in (agent, auditor, operator):
        refused = notify(caller.client, first["job"]["job_id"], caller.token,
                         status="succeeded")
        assert refused.status_code == 401 and refused.json()["code"] == "unauthenticated"
    assert notify(agent.client, first["job"]["job_id"], "wlj_nonsense",
                  status="succeeded").status_code == 401
    assert not Event.objects.filter(kind="job.updated").exists()
    # With the goal's worker still holding the lease, a report wakes nothing.
    assert notify(agent.client, first["job"]["job_id"], first["notify_token"],
                  status="failed").status_code == 200
    assert not Schedule.objects.filter(name=watchdogs.requested_schedule_name(gid)).exists()


def test_the_timeline_shows_a_requested_wake_and_who_reported_a_job(agent, running, clock,
                                                                    admin_client):
    gid, lease = running()
    tracked = agent.post(f"goals/{gid}/jobs", {"lease": lease, "kind": "ci", "ref": "r-1",
                                               "notify": True}).json()
    agent.post(f"goals/{gid}/lease/release", {"lease": lease,
                                              "wake": {"in_seconds": 600}})
    notify(None, tracked["job"]["job_id"], tracked["notify_token"], status="succeeded")
    page = admin_client.get(f"/admin/ledger/goal/{gid}/timeline/").content.decode()
    assert "one-off wake asked for (timeout_recovery)" in page
    assert "one-off wake asked for (dependency_ready)" in page and "replaces" in page
    assert "reported by its notify token" in page
    assert tracked["notify_token"] not in page


def test_a_notify_job_does_not_keep_a_silent_holder_alive(agent, running, clock):
    """Found by the simulation: a job that reports its own end needs no holder,
    so a holder that goes silent while it runs is swept like any other."""
    from scheduling import tasks

    gid, lease = running()
    agent.post(f"goals/{gid}/jobs", {"lease": lease, "kind": "ci", "ref": "r-9",
                                     "notify": True})
    clock.advance(minutes=7)  # the 300 s lease and its 60 s grace are over
    assert tasks.sweep_leases() == 1
    assert Goal.objects.get(pk=gid).state["lease"] == {}
