"""Liveness proven by evidence (docs/design.md, "Liveness: no goal is ever
silently stuck — proven by evidence"): every scenario that left a goal stuck
for weeks while `liveness`, `doctor` and `/alerts` said it was fine, through
the API, the real sweeper task and the django-q2 rows.

Each failed on the code before: the goal stayed `scheduled`/`working`/`ready`
with an empty /alerts, or waited an hour for its next slot.
"""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django_q.models import Schedule

from ledger.models import Event, Goal
from ledger.services import alerts
from scheduling import maintenance, tasks, watchdogs
from tests.factories import COMPLETED, kinds, lease_of
from tests.scheduling.test_liveness import fire_schedule

pytestmark = pytest.mark.django_db


def alert_reasons(operator) -> dict[str, str]:
    return {row["id"]: row["reason"]
            for row in operator.get("alerts", page_size=200).json()["results"]}


def host_goal(agent, started, clock, *, receipt: bool = True) -> tuple[str, dict, dict]:
    """A host goal whose watchdog the host created (or not): released at once."""
    gid, lease = started(scheduler="host", cadence_minutes=60)
    spec = agent.post(f"goals/{gid}/watchdog", {"lease": lease}).json()["host_schedule"]
    if receipt:
        agent.post(f"goals/{gid}/watchdog/receipts", {"lease": lease, "status": "created",
                                                      "host_ref": "cron-1",
                                                      "due_at": spec["first_due_at"]})
    agent.post(f"goals/{gid}/lease/release", {"lease": lease})
    return gid, lease, spec


def alerts_exit_code() -> int:
    try:
        call_command("ledger", "alerts", stdout=io.StringIO())
    except CommandError as error:
        return error.returncode
    return 0


# ------------------------------------------------------ a host that stopped firing


def test_a_host_that_stops_claiming_is_host_silent_and_told_again(agent, operator, started,
                                                                  clock, admin_client):
    gid, _lease, _spec = host_goal(agent, started, clock)
    body = agent.get(f"goals/{gid}").json()
    assert body["liveness"] == "scheduled" and body["expected"]["evidence"] == "host_claim"
    # Two hourly slots pass with no claim; each had half an interval of lateness.
    clock.advance(hours=2, minutes=29)
    tasks.sweep_leases()
    assert gid not in alert_reasons(operator)  # the second slot's lateness is not over
    clock.advance(minutes=2)
    tasks.sweep_leases()
    assert alert_reasons(operator)[gid] == "HOST_SILENT"
    missed = Event.objects.get(goal_id=gid, kind="liveness.missed")
    assert missed.data["reason"] == "HOST_SILENT" and missed.actor == "scheduler"
    body = agent.get(f"goals/{gid}").json()
    assert body["liveness"] == "needs_human" and body["alert"]["reason"] == "HOST_SILENT"
    assert alerts_exit_code() == 1
    # The admin agrees: the dashboard's group says what to do, the timeline's badge why.
    dashboard = admin_client.get("/admin/ledger/goal/dashboard/").content.decode()
    assert "HOST_SILENT" in dashboard and "re-create it" in dashboard and gid in dashboard
    timeline = admin_client.get(f"/admin/ledger/goal/{gid}/timeline/").content.decode()
    assert "needs_human: HOST_SILENT" in timeline
    # The agent's next contact is told to check and re-create the host task.
    pulled = agent.post(f"goals/{gid}/lease", {}).json()
    assert pulled["acquired"] is True
    assert pulled["host_instructions"]["next_required_action"] == "check_the_host_schedule"
    agent.post(f"goals/{gid}/lease/release", {"lease": lease_of(pulled)})
    # Its host is heard from again (at the 12:00 slot): the alert ends by itself.
    clock.advance(minutes=29)
    assert agent.post(f"goals/{gid}/claim", {}).json()["outcome"] == "recurring_acquired"
    assert gid not in alert_reasons(operator)


def test_a_host_watchdog_never_confirmed_by_a_receipt_is_host_silent(agent, operator,
                                                                     started, clock):
    gid, _lease, _spec = host_goal(agent, started, clock, receipt=False)
    assert agent.get(f"goals/{gid}").json()["liveness"] == "scheduled"
    clock.advance(hours=1, minutes=31)  # first due + half an interval, unconfirmed
    tasks.sweep_leases()
    assert alert_reasons(operator)[gid] == "HOST_SILENT"


# ------------------------------------------------------ a recovered host goal


def test_a_recovered_host_goal_nobody_pulls_is_ready_unclaimed(agent, operator, started,
                                                              clock):
    gid, lease = started(scheduler="host", cadence_minutes=60)
    agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                     "error_text": "segmentation fault"})
    recovered = operator.post(f"goals/{gid}/recover", {"reason": "fixed"}).json()
    assert recovered["liveness"] == "ready" and recovered["expected"]["evidence"] == "pull"
    clock.advance(minutes=119)
    tasks.sweep_leases()
    assert gid not in alert_reasons(operator)
    clock.advance(minutes=2)
    tasks.sweep_leases()
    goal = Goal.objects.get(pk=gid)
    assert (goal.status, goal.reason) == ("blocked", "READY_UNCLAIMED")
    assert alert_reasons(operator)[gid] == "READY_UNCLAIMED"
    # An operator can send it back: it is ready again.
    again = operator.post(f"goals/{gid}/recover", {"reason": "the host polls again"}).json()
    assert again["liveness"] == "ready"


# ------------------------------------------ the holder dies while a blocking job runs


def test_a_dead_holder_never_locks_the_goal_behind_its_ci_run(agent, operator, started, clock):
    gid, lease = started(cadence_minutes=60)
    tracked = agent.post(f"goals/{gid}/jobs", {"lease": lease, "kind": "ci_run",
                                               "ref": "gh-run-4711"})
    assert tracked.status_code == 201, tracked.json()
    # The agent dies: no heartbeat. Past the lease (300 s) and its grace the
    # goal can be taken over, and its crash resumes it in minutes.
    clock.advance(minutes=6, seconds=1)
    body = agent.get(f"goals/{gid}").json()
    assert body["liveness"] == "expired"  # not "working": nobody has swept it yet
    tasks.sweep_leases()
    name = watchdogs.requested_schedule_name(gid)
    assert Schedule.objects.get(name=name).next_run == clock()
    assert fire_schedule(name, clock) == "ready_for_pull"
    pulled = agent.start().json()
    assert pulled["acquired"] is True and pulled["resumed"]["reason"] == "timeout_recovery"
    assert pulled["resumed"]["charged"] is True
    [job] = pulled["resume_packet"]["jobs_to_inspect"]
    assert (job["ref"], job["status"]) == ("gh-run-4711", "unknown")
    # Nobody reports the job: after its deadline (6 h) it is JOB_SILENT.
    lease = lease_of(pulled)
    agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "waiting for CI",
                                            "progress_pct": 10, "release_lease": True})
    clock.advance(hours=6)
    tasks.sweep_leases()
    assert alert_reasons(operator)[gid] == "JOB_SILENT"
    # An operator writes the job off; the goal may finish again.
    operator.post(f"goals/{gid}/recover", {"reason": "the CI run was deleted"})
    # (No scheduler ran its slots in these 6 h: that is what it is listed for now.)
    assert alert_reasons(operator)[gid] == "OVERDUE"
    state = Goal.objects.get(pk=gid).state
    assert state["jobs"][0]["status"] == "cancelled"
    pulled = agent.post(f"goals/{gid}/lease", {}).json()
    done = agent.post(f"goals/{gid}/finish", {"lease": lease_of(pulled), **COMPLETED})
    assert done.json()["completion_state"] == "completed", done.json()


def test_another_worker_takes_over_a_dead_holder_waiting_on_a_job(agent, started, clock):
    gid, lease = started()
    agent.post(f"goals/{gid}/jobs", {"lease": lease, "kind": "ci_run", "ref": "gh-run-9"})
    clock.advance(minutes=6, seconds=1)
    taken = agent.post(f"goals/{gid}/lease", {}).json()
    assert taken["acquired"] is True, taken  # never wait_for_job behind a dead holder


# ------------------------------------------------ schedule rows repair themselves


@pytest.mark.parametrize("damage", ["deleted", "exhausted"])
def test_a_damaged_watchdog_row_is_repaired_on_the_goals_history(agent, started, clock,
                                                                 damage):
    gid, lease = started(cadence_minutes=60)
    agent.post(f"goals/{gid}/lease/release", {"lease": lease})
    name = watchdogs.schedule_name(gid)
    slot = Schedule.objects.get(name=name).next_run
    if damage == "deleted":
        Schedule.objects.filter(name=name).delete()
    else:
        Schedule.objects.filter(name=name).update(repeats=0)  # django-q2 skips it forever
    clock.advance(hours=1, minutes=6)
    tasks.sweep_leases()
    repair = Event.objects.filter(goal_id=gid, kind="receipt.recorded").last()
    assert repair.data["repair"] == ("missing" if damage == "deleted" else "exhausted")
    row = Schedule.objects.get(name=name)
    assert row.repeats == -1 and row.next_run == slot  # the owed slot, on the anchor's grid
    assert fire_schedule(name, clock) == "ready_for_pull"
    assert Goal.objects.get(pk=gid).next_wake_at == slot + timedelta(hours=1)


def test_doctor_checks_rows_by_content_and_fix_repairs_them(agent, started, clock):
    tasks.sweep_leases()  # the scheduler's heartbeat
    gid, lease = started(cadence_minutes=60)
    agent.post(f"goals/{gid}/lease/release", {"lease": lease})
    name = watchdogs.schedule_name(gid)
    Schedule.objects.filter(name=name).update(args=repr("someone-else"))
    out = io.StringIO()
    with pytest.raises(CommandError, match="1 problem"):
        call_command("ledger", "doctor", stdout=out)
    assert "schedule_exhausted" in out.getvalue()
    out = io.StringIO()
    call_command("ledger", "doctor", "--fix", stdout=out)
    assert "fixed:" in out.getvalue() and "no problems" in out.getvalue()
    assert Schedule.objects.get(name=name).args == repr(gid)
    assert Event.objects.filter(goal_id=gid, kind="receipt.recorded").last().actor == "operator"


def test_rows_of_ended_goals_and_the_sweeper_row_are_repaired_hourly(agent, started, clock):
    gid, lease = started()
    agent.post(f"goals/{gid}/finish", {"lease": lease, **COMPLETED})
    stray = watchdogs.reset_schedule_name(gid)
    Schedule.objects.create(name=stray, func=watchdogs.FIRE, args=repr(gid),
                            schedule_type=Schedule.ONCE, next_run=clock())
    Schedule.objects.filter(name=watchdogs.SWEEPER_NAME).delete()
    assert maintenance.repair_schedules() >= 2
    assert not Schedule.objects.filter(name=stray).exists()
    assert Schedule.objects.filter(name=watchdogs.SWEEPER_NAME).exists()
    assert kinds(gid)[-1] == "receipt.recorded"
    assert Event.objects.filter(goal_id=gid).last().data["repair"] == "orphaned"


# ------------------------------------------------------ a crashed agent, in minutes


def test_a_crashed_agent_resumes_minutes_after_its_lease_not_at_the_next_slot(agent, started,
                                                                             clock):
    gid, lease = started(cadence_minutes=60)
    clock.advance(minutes=2)
    agent.post(f"goals/{gid}/lease/heartbeat", {"lease": lease})  # the last sign of life
    crashed_at = clock()
    clock.advance(minutes=6, seconds=1)  # lease 300 s + grace 60 s
    tasks.sweep_leases()
    clock.advance(seconds=30)  # django-q2 looks at its rows every 30 s
    assert fire_schedule(watchdogs.requested_schedule_name(gid), clock) == "ready_for_pull"
    pulled = agent.start().json()
    assert pulled["acquired"] and pulled["resumed"]["reason"] == "timeout_recovery"
    assert clock() - crashed_at < timedelta(minutes=10)
    assert Goal.objects.get(pk=gid).state["continuations_used"] == 1


# ------------------------------------------------------ a scheduler down for hours


def test_a_goal_past_its_deadline_with_no_sweeper_is_listed_overdue(agent, operator, started,
                                                                   clock):
    tasks.sweep_leases()
    gid, lease = started(cadence_minutes=60)
    agent.post(f"goals/{gid}/lease/release", {"lease": lease})
    assert alerts.scheduler_health()["status"] == "ok"
    clock.advance(hours=1, minutes=8)  # no scheduler fired the slot, no sweep ran
    assert alert_reasons(operator)[gid] == "OVERDUE"
    assert agent.get(f"goals/{gid}").json()["liveness"] == "overdue"
    assert alerts.scheduler_health()["status"] == "silent"
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("ledger", "doctor", stdout=out)
    assert "scheduler_silent" in out.getvalue() and "overdue" in out.getvalue()
    health = operator.client.get("/api/v1/health").json()
    assert health["scheduler"]["status"] == "silent"


def test_a_wake_fired_after_hours_of_outage_stands_for_every_missed_slot(agent, started,
                                                                         clock):
    """Found by the simulation: after an outage django-q2 (catch_up off) fires
    the oldest missed slot once and moves its row to the first slot ahead. The
    claim must expect that slot too, or the repair would find the row "late",
    recreate it in the past and replay every missed slot, each a wake without
    progress, toward the wake-loop bound."""
    gid, lease = started(cadence_minutes=60)
    agent.post(f"goals/{gid}/lease/release", {"lease": lease})
    name = watchdogs.schedule_name(gid)
    first = Schedule.objects.get(name=name).next_run
    clock.advance(hours=5, minutes=10)  # the scheduler was down for five slots
    assert fire_schedule(name, clock) == "ready_for_pull"
    row = Schedule.objects.get(name=name)
    assert Goal.objects.get(pk=gid).next_wake_at == row.next_run == first + timedelta(hours=5)
    assert Goal.objects.get(pk=gid).state["retry_count"] == 1
    tasks.sweep_leases()
    maintenance.repair_schedules()
    assert Event.objects.filter(goal_id=gid, data__repair__isnull=False).count() == 0
