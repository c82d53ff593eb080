"""The wake loop closes by itself: pull wakes, slot-aligned claims, the
recovery-only budget, re-armed watchdogs, the uncertain-attempt rule decided
in one place (docs/design.md, "Uncertain attempts are terminal"), certain
dispatch failures, an operator's wake-now and `ledger doctor`.

Each test names the problem it pins down; each failed on the code before.
"""

import io
import socket
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django_q.models import Schedule

from ledger.models import Event, Goal
from ledger.services import alerts
from scheduling import maintenance, tasks, watchdogs
from scheduling.models import Dispatch
from tests.factories import COMPLETED, kinds, lease_of

pytestmark = pytest.mark.django_db

CLAUDE_LIMIT = "Claude usage limit reached. Your limit will reset in 10 minutes."



def fire_schedule(name: str, clock) -> str:
    """What django-q2's scheduler does with a due row: run the task with the
    row's intended time, then move a recurring row on (or delete a one-off)."""
    row = Schedule.objects.get(name=name)
    kwargs = eval(row.kwargs) if row.kwargs else {}  # noqa: S307 (our own literal)
    outcome = tasks.fire_watchdog(eval(row.args), intended_date=row.next_run.isoformat(),  # noqa: S307
                                  **kwargs)
    if row.schedule_type == Schedule.ONCE:
        row.delete()
    else:
        while row.next_run <= clock():
            row.next_run = row.calculate_next_run(row.next_run)
        row.save()
    return outcome


def doctor() -> str:
    """`ledger doctor`, with the scheduler's heartbeat fresh (as a running
    qcluster keeps it): these tests are about the goals, not the scheduler."""
    alerts.beat()
    out = io.StringIO()
    call_command("ledger", "doctor", stdout=out)
    return out.getvalue()


# --------------------------------------------------- the default wake resumes nothing


@pytest.mark.parametrize("agent_first", [False, True], ids=["wake-then-agent", "agent-first"])
def test_a_rate_limited_goal_resumes_by_pull_with_default_settings(agent, started, clock,
                                                                   agent_first):
    gid, lease = started()
    paused = agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                              "error_text": CLAUDE_LIMIT}).json()
    assert paused["status"] == "paused"
    assert "no problems" in doctor()
    clock.advance(minutes=13)  # the reset (10 min) + the 2 min margin are over
    if not agent_first:
        assert fire_schedule(watchdogs.reset_schedule_name(gid), clock) == "ready_for_pull"
        assert Goal.objects.get(pk=gid).state["ready"]["reason"] == "rate_limit_reset"
        clock.advance(minutes=15)
        tasks.sweep_leases()  # nothing was handed to anyone: nothing to interrupt
        assert Goal.objects.get(pk=gid).status == "waiting"
    # The agent polls as the skill document says: run_goal again.
    pulled = agent.start().json()
    assert pulled["acquired"] is True, pulled
    assert pulled["resumed"]["reason"] == "rate_limit_reset" and pulled["resumed"]["charged"]
    assert pulled["resume_packet"]["checkpoint"]["current_step"] == "plan"
    lease = lease_of(pulled)
    done = agent.post(f"goals/{gid}/finish", {"lease": lease, **COMPLETED}).json()
    assert done["completion_state"] == "completed"
    assert kinds(gid).count("continuation.charged") == 1  # charged once, either way
    assert not Schedule.objects.filter(name__endswith=gid).exists()


# ---------------------------------------- claims that are not granted consume nothing


def test_a_busy_claim_consumes_nothing_and_the_same_occurrence_completes_the_takeover(
        agent, started, clock):
    gid, lease = started(scheduler="host", lease_seconds=300)
    spec = agent.post(f"goals/{gid}/watchdog", {"lease": lease}).json()["host_schedule"]
    agent.post(f"goals/{gid}/watchdog/receipts", {"lease": lease, "status": "created",
                                                  "host_ref": "cron-1",
                                                  "due_at": spec["first_due_at"]})
    clock.advance(minutes=55)
    agent.post(f"goals/{gid}/lease/heartbeat", {"lease": lease})  # expires at 10:00
    clock.advance(minutes=5, seconds=30)  # the slot; the lease expired, 30 s of grace remain
    busy = agent.post(f"goals/{gid}/claim", {"occurrence_id": "run-7"}).json()
    assert busy["outcome"] == "worker_busy_noop" and busy["retry_after_seconds"] <= 60
    clock.advance(seconds=busy["retry_after_seconds"])
    again = agent.post(f"goals/{gid}/claim", {"occurrence_id": "run-7"}).json()
    assert again["outcome"] == "recurring_acquired", again  # the seed's "retry in the turn"


def test_late_and_early_fires_never_shift_later_slots(agent, started, clock):
    gid, lease = started(cadence_minutes=60)
    agent.post(f"goals/{gid}/lease/release", {"lease": lease})
    name = watchdogs.schedule_name(gid)
    slot = Schedule.objects.get(name=name).next_run
    # The scheduler picks the first slot up 9 minutes late, while the agent works.
    clock.advance(hours=1, minutes=9)
    assert fire_schedule(name, clock) == "ready_for_pull"
    pulled = agent.post(f"goals/{gid}/lease", {}).json()
    assert pulled["acquired"] is True
    goal = Goal.objects.get(pk=gid)
    assert goal.next_wake_at == slot + timedelta(hours=1)  # not 09 past
    # The next slot fires on time and is due: no hour lost.
    clock.advance(minutes=49)
    agent.post(f"goals/{gid}/lease/heartbeat", {"lease": lease_of(pulled)})
    clock.advance(minutes=2)
    outcome = fire_schedule(name, clock)
    assert outcome == "worker_busy_noop"  # due (not not_due); the agent still works
    assert Goal.objects.get(pk=gid).next_wake_at == slot + timedelta(hours=2)


def test_a_host_claim_without_an_occurrence_id_is_named_after_its_slot(agent, started, clock):
    gid, lease = started(scheduler="host")
    spec = agent.post(f"goals/{gid}/watchdog", {"lease": lease}).json()["host_schedule"]
    agent.post(f"goals/{gid}/watchdog/receipts", {"lease": lease, "status": "created",
                                                  "host_ref": "cron-1",
                                                  "due_at": spec["first_due_at"]})
    agent.post(f"goals/{gid}/lease/release", {"lease": lease})
    clock.advance(hours=1, seconds=-20)  # the host fires 20 s early
    first = agent.post(f"goals/{gid}/claim", {}).json()
    assert first["outcome"] == "recurring_acquired"
    assert first["occurrence_id"] == "host:slot:2026-12-02T10:00:00.000000Z"
    clock.advance(minutes=3)  # ...and again, late: the same slot
    assert agent.post(f"goals/{gid}/claim", {}).json()["outcome"] == "already_claimed"


# --------------------------------------------- approval and recover leave a way forward


def test_recover_rearms_the_watchdog_due_at_once(agent, operator, started, clock):
    gid, lease = started(cadence_minutes=60)
    agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                     "error_text": "segmentation fault (core dumped)"})
    assert not Schedule.objects.filter(name=watchdogs.schedule_name(gid)).exists()
    clock.advance(hours=5)
    recovered = operator.post(f"goals/{gid}/recover", {"reason": "fixed the host"}).json()
    assert recovered["status"] == "waiting" and recovered["liveness"] == "scheduled"
    assert Schedule.objects.get(name=watchdogs.schedule_name(gid)).next_run == clock()
    assert fire_schedule(watchdogs.schedule_name(gid), clock) == "ready_for_pull"
    assert "no problems" in doctor()


# --------------------------------------------- the budget is for recovery continuations


def test_an_hourly_goal_works_for_a_day_on_scheduled_progress_wakes(agent, started, clock):
    gid, lease = started(cadence_minutes=60, max_continuations=3)
    name = watchdogs.schedule_name(gid)
    for hour in range(24):
        step = agent.post(f"goals/{gid}/checkpoints", {
            "lease": lease, "current_step": f"hour {hour}", "progress_pct": hour * 4,
            "release_lease": True})
        assert step.status_code == 201, step.json()
        clock.advance(hours=1)
        assert fire_schedule(name, clock) == "ready_for_pull"
        pulled = agent.post(f"goals/{gid}/lease", {}).json()
        assert pulled["acquired"] and pulled["resumed"]["reason"] == "scheduled_progress"
        lease = lease_of(pulled)
    goal = Goal.objects.get(pk=gid)
    assert goal.status == "running" and goal.state["continuations_used"] == 0


# ---------------------------------------------------------- AGENT_BLOCKED recoverable


def test_a_goal_its_agent_blocked_can_be_recovered(agent, operator, started):
    gid, lease = started()
    agent.post(f"goals/{gid}/finish", {"lease": lease, "status": "blocked"})
    assert Goal.objects.get(pk=gid).reason == "AGENT_BLOCKED"
    recovered = operator.post(f"goals/{gid}/recover", {"reason": "credentials rotated"})
    assert recovered.status_code == 200 and recovered.json()["status"] == "waiting"


# ------- the uncertain-attempt rule decided once; certain dispatch failures are not uncertain


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_refused_dispatch_releases_its_lease_at_once(agent, started, clock, settings):
    settings.WAKELEDGER_DISPATCHERS = {"hook": {
        "type": "webhook", "url": f"http://127.0.0.1:{_closed_port()}/hook", "secret": "s"}}
    gid, lease = started(dispatch="hook", cadence_minutes=60)
    agent.post(f"goals/{gid}/lease/release", {"lease": lease})
    clock.advance(hours=1)
    assert fire_schedule(watchdogs.schedule_name(gid), clock) == "recurring_acquired"
    goal = Goal.objects.get(pk=gid)
    assert goal.status == "waiting" and goal.state["lease"] == {}
    dispatched = Event.objects.get(goal_id=gid, kind="continuation.dispatched")
    assert dispatched.data["ok"] is False and dispatched.data["uncertain"] is False
    released = Event.objects.filter(goal_id=gid, kind="lease.released").last()
    assert released.data["why"].startswith("dispatch failed")
    assert Dispatch.objects.get(goal_id=gid).status == Dispatch.FAILED
    clock.advance(minutes=30)
    tasks.sweep_leases()
    assert Goal.objects.get(pk=gid).status == "waiting"  # never INTERRUPTED_UNKNOWN


def test_a_sender_that_died_mid_dispatch_is_uncertain_and_never_resent(agent, started, clock,
                                                                        settings):
    settings.WAKELEDGER_DISPATCHERS = {"hook": {
        "type": "webhook", "url": f"http://127.0.0.1:{_closed_port()}/hook", "secret": "s"}}
    gid, lease = started(dispatch="hook", cadence_minutes=60)
    agent.post(f"goals/{gid}/lease/release", {"lease": lease})
    clock.advance(hours=1)
    from ledger.services import wakes as continuations

    due = clock().isoformat()
    occurrence = f"internal:{gid}@{due}"
    continuations.claim(gid, source="internal", occurrence_id=occurrence, actor="scheduler",
                        intended_at=due, push=True)
    # The sender marked the row sending and died before it could record anything.
    Dispatch.objects.filter(goal_id=gid).update(status=Dispatch.SENDING, sending_at=clock())
    clock.advance(minutes=2)
    tasks.sweep_leases()
    row = Dispatch.objects.get(goal_id=gid)
    assert row.status == Dispatch.UNCERTAIN
    dispatched = Event.objects.get(goal_id=gid, kind="continuation.dispatched")
    assert dispatched.data["uncertain"] is True
    for _ in range(10):  # the lease (300 s) and its grace pass, no sign of life; the
        clock.advance(minutes=1)  # sweeper runs every minute (no outage to excuse it)
        tasks.sweep_leases()
    goal = Goal.objects.get(pk=gid)
    assert (goal.status, goal.reason) == ("blocked", "INTERRUPTED_UNKNOWN")
    assert Dispatch.objects.filter(goal_id=gid).count() == 1


# --------------------------------------------------------------- an operator's wake now


def test_an_operator_ends_a_pause_early(agent, operator, started, clock):
    gid, lease = started()
    agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                     "error_text": "You've hit your limit · resets 8am"})
    assert Goal.objects.get(pk=gid).status == "paused"
    woken = operator.post(f"goals/{gid}/wake", {"reason": "the reset came early"}).json()
    assert woken["outcome"] == "ready_for_pull"
    claimed = Event.objects.filter(goal_id=gid, kind="wake.claimed").last()
    assert claimed.actor == "operator-1"
    assert (claimed.data["operator"], claimed.data["why"]) == ("operator-1",
                                                               "the reset came early")
    pulled = agent.post(f"goals/{gid}/lease", {}).json()
    assert pulled["acquired"] is True
    # A goal at an approval gate is never woken, not even by an operator.
    agent.post(f"goals/{gid}/approvals", {"lease": lease_of(pulled), "gate": "deploy"})
    refused = operator.post(f"goals/{gid}/wake", {"reason": "go"})
    assert refused.status_code == 409 and refused.json()["code"] == "not_wakeable"


def test_ledger_wake_command(agent, started, clock):
    gid, lease = started()
    agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                     "error_text": CLAUDE_LIMIT})
    out = io.StringIO()
    call_command("ledger", "wake", gid, "--reason", "quota raised", "--operator", "bob",
                 stdout=out)
    assert "ready for pull: its dispatcher is none" in out.getvalue()
    assert Event.objects.filter(goal_id=gid, kind="wake.claimed").last().actor == "bob"


# ----------------------------------------------------------------------------- doctor


def test_doctor_lists_stuck_goals_and_schedule_mismatches(agent, started, clock):
    gid, lease = started(cadence_minutes=60)
    agent.post(f"goals/{gid}/lease/release", {"lease": lease})
    assert "no problems" in doctor()
    # Someone deletes the scheduler's row behind the ledger's back.
    Schedule.objects.filter(name=watchdogs.schedule_name(gid)).delete()
    Schedule.objects.create(name="wakeledger-watchdog-00000000-0000-0000-0000-000000000000",
                            func=watchdogs.FIRE, schedule_type=Schedule.MINUTES, minutes=60)
    with pytest.raises(CommandError, match="2 problem"):
        doctor()


def test_a_deleted_wake_row_is_on_the_dashboard_after_the_hourly_repair(agent, started, clock,
                                                                       admin_client):
    """The dashboard checks no goal's rows itself (that cost a query per goal
    on every view): it shows what the newest doctor pass found, as of when it
    ran. A row deleted behind the ledger's back is listed once the hourly
    repair (the real task function) has run, with what the repair did."""
    gid, lease = started(cadence_minutes=60)
    agent.post(f"goals/{gid}/lease/release", {"lease": lease})
    page = admin_client.get("/admin/ledger/goal/dashboard/").content.decode()
    assert "Wake rows not checked yet" in page and "Wake rows missing" not in page
    alerts.beat()
    assert maintenance.repair_schedules() == 0  # a pass that finds nothing is kept too
    page = admin_client.get("/admin/ledger/goal/dashboard/").content.decode()
    assert "none missing or wrong" in page and "2026-12-02 09:00:00 UTC" in page
    clock.advance(minutes=10)
    Schedule.objects.filter(name=watchdogs.schedule_name(gid)).delete()
    page = admin_client.get("/admin/ledger/goal/dashboard/").content.decode()
    assert "Wake rows missing" not in page  # as of the last pass: not re-checked on a view
    clock.advance(minutes=30)  # the next repair (its wake is due at 10:00: not yet)
    assert maintenance.repair_schedules() == 1
    page = admin_client.get("/admin/ledger/goal/dashboard/").content.decode()
    assert "Wake rows missing or wrong (ledger doctor --fix) (1)" in page and gid in page
    assert "As of 2026-12-02 09:40:00 UTC, found by the hourly repair" in page
    assert "1 with a row missing or wrong" in page
    assert (f"schedule_missing {watchdogs.schedule_name(gid)}: receipt.recorded repaired: "
            "the schedule row was missing") in page
    assert Schedule.objects.filter(name=watchdogs.schedule_name(gid)).exists()  # repaired


def test_an_operator_wakes_a_paused_goal_from_the_admin(agent, started, clock, client):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    gid, lease = started()
    agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                     "error_text": CLAUDE_LIMIT})
    olga = get_user_model().objects.create_user("olga", password="pw-olga-1", is_staff=True)
    olga.groups.add(Group.objects.get_or_create(name="operator")[0])
    client.force_login(olga)
    timeline = client.get(f"/admin/ledger/goal/{gid}/timeline/").content.decode()
    assert "action-wake" in timeline and "action-recover" not in timeline
    client.post(f"/admin/ledger/goal/{gid}/act/wake/", {"reason": "the limit was lifted"})
    woken = Event.objects.filter(goal_id=gid, kind="wake.claimed").last()
    assert (woken.actor, woken.data["outcome"], woken.data["why"]) == (
        "olga", "ready_for_pull", "the limit was lifted")
