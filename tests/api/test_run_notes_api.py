"""POST /goals/{id}/runs with outcome ``note``: what the run went on through
is recorded and pauses nothing; a provider wait shows on the goal (the body,
the run answer, `ledger goals`) while its reset is ahead, and never as plain
running."""

import io

import pytest
from django.core.management import call_command

from ledger.models import Event, Goal
from ledger.services import sweeps
from tests.factories import lease_of

pytestmark = pytest.mark.django_db

SECRET = "PROVIDER-SECRET-TEXT"


@pytest.fixture
def running(agent, clock):
    body = agent.start(policy={"lease_seconds": 300}).json()
    return body["goal"]["id"], lease_of(body)


def test_a_subagents_rate_limit_noted_leaves_the_goal_running(agent, running):
    gid, lease = running
    response = agent.post(f"goals/{gid}/runs", {
        "lease": lease, "outcome": "note", "note": "subagent_failure",
        "error_text": f"{SECRET} rate limit exceeded. resets 3am (UTC)"})
    assert response.status_code == 200, response.json()
    answer = response.json()
    assert (answer["status"], answer["paused_until"], answer["classification"]) == (
        "running", None, "rate_limit")
    goal = Goal.objects.get(pk=gid)
    assert (goal.status, goal.reason) == ("running", "")
    noted = Event.objects.get(goal_id=gid, kind="run.reported")
    assert (noted.data["outcome"], noted.data["note"]) == ("note", "subagent_failure")
    assert not Event.objects.filter(goal_id=gid, kind="goal.paused").exists()
    assert SECRET not in str(noted.data)
    # The lease still works: the turn goes on and checkpoints.
    assert agent.post(f"goals/{gid}/checkpoints", {
        "lease": lease, "current_step": "went on", "progress_pct": 50}).status_code == 201


def test_a_provider_wait_shows_on_the_goal_until_its_reset(agent, running, clock):
    gid, lease = running
    until = "2026-12-02T12:00:00Z"
    answer = agent.post(f"goals/{gid}/runs", {
        "lease": lease, "outcome": "note", "note": "provider_wait",
        "error_text": "rate limit", "retry_after": until}).json()
    assert answer["status"] == "running"
    assert answer["provider_wait"]["until"] == "2026-12-02T12:00:00.000000Z"
    body = agent.get(f"goals/{gid}").json()
    assert body["status"] == "running"
    assert body["provider_wait"] == {"class": "rate_limit",
                                     "until": "2026-12-02T12:00:00.000000Z",
                                     "since": "2026-12-02T09:00:00.000000Z"}
    out = io.StringIO()
    call_command("ledger", "goals", stdout=out)
    assert "waiting for provider until 2026-12-02 12:00" in out.getvalue()
    # Not silent while the wait is within its reset: two hours of heartbeats
    # without a checkpoint (past the 60 min progress bound), the sweeper looking.
    for _ in range(30):
        clock.advance(minutes=4)
        agent.post(f"goals/{gid}/lease/heartbeat", {"lease": lease})
        sweeps.check(gid)
    body = agent.get(f"goals/{gid}").json()
    assert (body["status"], body["alert"], body["liveness"]) == ("running", None, "working")
    assert not Event.objects.filter(goal_id=gid, kind="liveness.missed").exists()
    clock.advance(hours=1, seconds=1)  # past the reset: running again, shown as such
    assert agent.get(f"goals/{gid}").json()["provider_wait"] is None


@pytest.mark.parametrize("body", [
    {"outcome": "note"},  # what is noted?
    {"outcome": "error", "note": "subagent_failure", "error_text": "rate limit"},
    {"outcome": "note", "note": "provider_wait"},  # until when?
    {"outcome": "note", "note": "a_pause_please"},
])
def test_a_note_that_says_nothing_readable_is_a_400(agent, running, body):
    gid, lease = running
    response = agent.post(f"goals/{gid}/runs", {"lease": lease, **body})
    assert response.status_code == 400, response.json()
    assert response.json()["code"] in ("validation_error", "invalid_command")
    assert not Event.objects.filter(goal_id=gid, kind="run.reported").exists()
