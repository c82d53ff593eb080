"""Progress an agent cannot fake, through the API and the real sweeper task
(docs/liveness.md, "What counts as progress"): a holder that churns its
lease, one that repeats its checkpoint, a pause to a reset days away and an
agent asking for a hundred continuations. Each was unlisted (or accepted) on
the code before; each is now listed for a person, who is notified."""

import pytest

from ledger.domain import policy
from ledger.models import Event, Notification
from scheduling import tasks
from tests.receivers import receiving

pytestmark = pytest.mark.django_db


@pytest.fixture
def hook(settings):
    """A webhook receiver as the one notification channel."""
    with receiving() as (url, received):
        settings.WAKELEDGER_NOTIFY = url.replace("http://", "json://")
        yield received


def alert_reasons(operator) -> dict[str, str]:
    page = operator.get("alerts").json()
    rows = page["results"] if isinstance(page, dict) else page
    return {row["id"]: row["reason"] for row in rows}


def notices(gid: str) -> list[tuple[str, str]]:
    return list(Notification.objects.filter(goal_id=gid).order_by("pk")
                .values_list("kind", "reason"))


def test_a_holder_that_churns_its_lease_is_listed_no_progress_and_told(
        agent, operator, started, clock, hook):
    """Release and retake the lease every 50 s, never a checkpoint: each grant
    restarted the progress clock, so the goal was never listed. Now it is
    listed by the deadline it had without a lease (15-minute cadence: 22.5
    minutes + the 60-minute progress bound), with its grants counted."""
    gid, lease = started(cadence_minutes=15)
    begun = clock.current
    for _ in range(200):
        clock.advance(seconds=50)
        assert agent.post(f"goals/{gid}/lease/release", {"lease": lease}).status_code == 200
        body = agent.post(f"goals/{gid}/lease").json()
        lease = {"token": body["lease"]["token"], "generation": body["lease"]["generation"]}
        tasks.sweep_leases()
        if gid in alert_reasons(operator):
            break
    assert alert_reasons(operator)[gid] == "NO_PROGRESS"
    assert (clock.current - begun).total_seconds() <= (22.5 + 60 + 1) * 60
    missed = Event.objects.get(goal_id=gid, kind="liveness.missed")
    counts = missed.data["since_progress"]
    assert counts["leases"] >= 90 and counts["empty_turns"] >= 90
    assert "lease grant" in missed.data["detail"]
    assert notices(gid) == [("needs_human", "NO_PROGRESS")]
    # The agent's own view says why and what counted.
    shown = agent.get(f"goals/{gid}").json()
    assert shown["alert"]["reason"] == "NO_PROGRESS"
    assert shown["since_progress"]["leases"] == counts["leases"]


def test_the_same_checkpoint_over_and_over_is_listed_and_a_real_one_clears_it(
        agent, operator, started, clock, hook):
    gid, lease = started()
    step = {"lease": lease, "current_step": "analyse the logs", "progress_pct": 10}
    assert agent.post(f"goals/{gid}/checkpoints", step).status_code == 201
    for _ in range(13):  # an hour of the same step and percent every 5 minutes
        clock.advance(minutes=5)
        assert agent.post(f"goals/{gid}/checkpoints", step).status_code == 201
        tasks.sweep_leases()
    assert alert_reasons(operator)[gid] == "NO_PROGRESS"
    missed = Event.objects.get(goal_id=gid, kind="liveness.missed")
    assert missed.data["since_progress"]["checkpoints"] == 12  # listed at the hour
    # Still not progress: the same again does not clear it.
    clock.advance(minutes=1)
    agent.post(f"goals/{gid}/checkpoints", step)
    assert alert_reasons(operator)[gid] == "NO_PROGRESS"
    # A checkpoint that moves does.
    moved = agent.post(f"goals/{gid}/checkpoints", {**step, "progress_pct": 20})
    assert moved.status_code == 201, moved.content
    assert gid not in alert_reasons(operator)
    assert agent.get(f"goals/{gid}").json()["since_progress"] == {}
    assert notices(gid) == [("needs_human", "NO_PROGRESS"), ("resolved", "NO_PROGRESS")]


def test_a_weekly_limit_is_listed_long_pause_after_a_day_with_its_reset(
        agent, operator, started, clock, hook):
    gid, lease = started()
    answer = agent.post(f"goals/{gid}/runs", {
        "lease": lease, "outcome": "error", "error_text": "429 Too Many Requests",
        "retry_after": str(6 * 86_400 + 23 * 3_600)})
    assert answer.status_code == 200, answer.content
    paused = agent.get(f"goals/{gid}").json()
    assert paused["status"] == "paused"
    clock.advance(hours=23, minutes=59)
    tasks.sweep_leases()
    assert gid not in alert_reasons(operator)
    clock.advance(minutes=2)
    tasks.sweep_leases()
    assert alert_reasons(operator)[gid] == "LONG_PAUSE"
    missed = Event.objects.get(goal_id=gid, kind="liveness.missed")
    assert missed.data["due_at"] == paused["paused_until"]
    assert notices(gid) == [("needs_human", "LONG_PAUSE")]
    # A person decides to wait: recovered, it stays paused and unlisted.
    recovered = operator.post(f"goals/{gid}/recover", {"reason": "wait for the reset"})
    assert recovered.status_code == 200, recovered.content
    assert recovered.json()["status"] == "paused" and gid not in alert_reasons(operator)


@pytest.mark.parametrize("name", ["max_continuations", "max_wake_retries"])
def test_a_hundred_continuations_or_wake_retries_are_refused_over_cap(agent, clock, name,
                                                                      settings):
    answer = agent.start(policy={name: 100})
    assert answer.status_code == 400, answer.content
    body = answer.json()
    assert body["code"] == "over_cap" and body["cap_name"] == name
    assert body["cap"] == policy.DEFAULT_CAPS[name]
    settings.WAKELEDGER_CAPS = {**policy.DEFAULT_CAPS, name: 100}
    assert agent.start(goal_key="allowed", policy={name: 100}).status_code == 201
