"""The server's clock runs two hours ahead for a few minutes and is set back
(ledger.domain.clocksteps): a holder that died in that window is found by the
sweeper and expires within its lease, and ``ledger doctor`` reports and
repairs such a goal. Through django-q2's task function, on the real store."""

from datetime import datetime, timedelta

import pytest

from ledger.models import Goal
from ledger.operators import doctor
from scheduling import tasks
from tests.factories import kinds

pytestmark = pytest.mark.django_db

AHEAD = timedelta(hours=2)


def run_while_ahead(clock, started) -> str:
    """A goal run (300 s lease) while the clock reads two hours ahead, whose
    holder then dies; the clock is set back 2.5 minutes after it jumped."""
    real = clock()
    clock.current = real + AHEAD
    gid, _lease = started()
    clock.current = real + timedelta(minutes=2, seconds=30)
    return gid


def test_a_holder_that_died_while_the_clock_ran_ahead_is_swept_within_its_lease(
        agent, started, clock):
    gid = run_while_ahead(clock, started)
    tasks.sweep_leases()
    assert "clock.stepped_back" in kinds(gid)
    goal = Goal.objects.get(id=gid)
    # 300 s lease and its stale grace from now: minutes, not two hours.
    assert goal.deadline_at is not None and goal.deadline_at <= clock() + timedelta(minutes=10)
    assert agent.get(f"goals/{gid}").json()["liveness"] == "working"
    for _ in range(10):  # the sweeper's minutely passes
        clock.advance(minutes=1)
        tasks.sweep_leases()
    assert "lease.expired" in kinds(gid)


def test_the_doctor_reports_a_goal_stamped_ahead_and_fix_brings_it_back(started, clock):
    gid = run_while_ahead(clock, started)
    found = [f for f in doctor.findings([gid]) if f.problem == "clock_ahead"]
    assert [f.goal_id for f in found] == [gid]
    doctor.fix([gid], actor="operator")
    assert "clock.stepped_back" in kinds(gid)
    assert not [f for f in doctor.findings([gid]) if f.problem == "clock_ahead"]
    assert Goal.objects.get(id=gid).deadline_at <= clock() + timedelta(minutes=10)


def test_with_the_scheduler_down_a_goal_stamped_ahead_is_listed_for_a_person(
        started, clock):
    """No sweep runs to correct it (the scheduler is down): its deadlines lie
    hours ahead, so it is listed OVERDUE now, counted like every listing,
    and no longer once a command brought its stamps back."""
    from ledger.services import alerts

    gid = run_while_ahead(clock, started)
    goals = Goal.objects.all()
    listed = [row for row in alerts.alerts(goals) if row["id"] == gid]
    assert [row["reason"] for row in listed] == ["OVERDUE"]
    assert datetime.fromisoformat(listed[0]["since"]) <= clock()
    assert alerts.counts_by_reason(goals, clock()).get("OVERDUE") == alerts.count(goals)
    doctor.fix([gid], actor="operator")
    assert gid not in [row["id"] for row in alerts.alerts(Goal.objects.all())]


def test_a_ready_goal_blocked_while_the_clock_ran_ahead_is_ready_again_and_pulled(
        agent, operator, started, clock):
    """A host goal ready for its agent's pull (an operator recovered it) for
    25 minutes when the clock jumps eight hours ahead: the sweeper, on that
    clock, blocks it READY_UNCLAIMED. Set back, the next sweep records the
    step, which withdraws the block: the goal is ready again, unlisted, and
    its agent's lease call pulls it."""
    gid, lease = started(scheduler="host", cadence_minutes=60)
    agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                     "error_text": "segmentation fault"})
    operator.post(f"goals/{gid}/recover", {"reason": "fixed"})
    real = clock()
    clock.current = real + timedelta(minutes=25) + timedelta(hours=8)
    tasks.sweep_leases()
    goal = Goal.objects.get(id=gid)
    assert (goal.status, goal.reason) == ("blocked", "READY_UNCLAIMED")
    clock.current = real + timedelta(minutes=30)
    tasks.sweep_leases()
    assert "clock.stepped_back" in kinds(gid)
    body = agent.get(f"goals/{gid}").json()
    assert (body["status"], body["liveness"], body["alert"]) == ("waiting", "ready", None)
    assert "unclaimed" not in body
    pulled = agent.post(f"goals/{gid}/lease", {}).json()
    assert pulled["acquired"] is True, pulled
    assert Goal.objects.get(id=gid).status == "running"
