"""A backlog counts once: wakes django-q2 queued while its workers stalled
(a hang, a busy queue) run within seconds of each other afterwards, one per
slot the workers missed. They collapse into one claim for the goal; they
used up its wake retries in seconds, blocked it WAKE_RETRIES_EXHAUSTED and
cancelled its watchdog on the code before."""

from datetime import datetime, timedelta

import pytest
from django_q.models import Schedule

from ledger.models import Event, Goal
from scheduling import tasks

pytestmark = pytest.mark.django_db


def queued_while_stalled(name: str, clock, minutes: int) -> list[str]:
    """django-q2's scheduler keeps turning the due row into tasks (its
    intended run time each) while no worker takes them."""
    row = Schedule.objects.get(name=name)
    intended = []
    for _ in range(minutes):
        clock.advance(minutes=1)
        while row.next_run <= clock():
            intended.append(row.next_run.isoformat())
            row.next_run = row.calculate_next_run(row.next_run)
    row.save()
    return intended


@pytest.mark.parametrize("working", [False, True], ids=["between-turns", "agent-working"])
def test_wakes_queued_during_a_worker_stall_are_one_claim(agent, started, clock, working):
    gid, lease = started(cadence_minutes=1, max_wake_retries=5)
    prepared = agent.post(f"goals/{gid}/watchdog", {"lease": lease}).json()
    name = prepared["watchdog"]["schedule_name"]
    if not working:
        done = agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "built",
                                                       "progress_pct": 30,
                                                       "release_lease": True})
        assert done.status_code == 201, done.content
    stalled = queued_while_stalled(name, clock, 7)
    assert len(stalled) >= 7
    if working:  # the agent works on through the stall, its heartbeats heard
        agent.post(f"goals/{gid}/lease/heartbeat", {"lease": lease})
    outcomes = []
    for intended in stalled:  # the worker is back: the backlog in a second or two
        clock.advance(milliseconds=200)
        outcomes.append(tasks.fire_watchdog(gid, intended_date=intended))
    claims = Event.objects.filter(goal_id=gid, kind="wake.claimed")
    goal = Goal.objects.get(pk=gid)
    assert goal.status != "blocked", outcomes
    assert goal.state["watchdog"]["status"] == "live"
    if working:
        assert set(outcomes) <= {"worker_busy_noop", "already_claimed"}
        assert goal.state.get("retry_count", 0) == 0
    else:
        assert outcomes[0] == "ready_for_pull"
        assert set(outcomes[1:]) == {"already_claimed"}
        assert claims.count() == 1 and goal.state["retry_count"] == 1
    # The next slot after the stall is a wake of its own, on time.
    row = Schedule.objects.get(name=name)
    assert datetime.fromisoformat(goal.state["watchdog"]["next_due_at"].replace("Z", "+00:00")) \
        > clock() - timedelta(minutes=1)
    assert row.next_run > clock() - timedelta(minutes=1)
