"""Progress deadlines and the caps on what an agent chooses (docs/liveness.md),
each through the API, the real sweeper task and django-q2's own task records:
a holder that only heartbeats is listed, a checkpoint keeps the lease, no agent
chooses a day-long lease or a hundred silent host slots, a receipt a year ahead
never becomes the anchor, and a wake whose task always raises is listed after
a few repairs instead of being repaired forever.
"""

import queue
import traceback
import uuid
from datetime import datetime, timedelta
from multiprocessing import Value

import pytest
from django_q.brokers import get_broker
from django_q.models import Schedule
from django_q.monitor import save_task
from django_q.worker import worker

from ledger.domain import policy
from ledger.domain.events import iso
from ledger.domain.overdue import MAX_REPAIRS
from ledger.models import Event, Goal
from scheduling import tasks
from scheduling.models import Dispatch

pytestmark = pytest.mark.django_db


def listed(operator) -> dict[str, dict]:
    """Every goal /alerts lists, over all its pages (a list before pagination)."""
    found: dict[str, dict] = {}
    page = operator.get("alerts").json()
    while True:
        rows = page["results"] if isinstance(page, dict) else page
        found.update({row["id"]: row for row in rows})
        following = page.get("next") if isinstance(page, dict) else None
        if not following:
            return found
        page = operator.client.get(following).json()


def reason(operator, gid: str) -> str | None:
    row = listed(operator).get(gid)
    return row["reason"] if row else None


# ------------------------------------------------ a holder that only heartbeats


def test_a_holder_that_only_heartbeats_is_listed_no_progress_and_keeps_its_lease(
        agent, operator, started, clock):
    gid, lease = started()  # 300 s lease, progress_minutes 60 by default
    for _ in range(14):  # 56 minutes of heartbeats every 4 minutes, no checkpoint
        clock.advance(minutes=4)
        assert agent.post(f"goals/{gid}/lease/heartbeat", {"lease": lease}).status_code == 200
        tasks.sweep_leases()
    assert reason(operator, gid) is None  # within the hour
    clock.advance(minutes=5)
    assert agent.post(f"goals/{gid}/lease/heartbeat", {"lease": lease}).status_code == 200
    tasks.sweep_leases()
    row = listed(operator)[gid]
    assert row["reason"] == "NO_PROGRESS" and "checkpoint" in row["why"]
    missed = Event.objects.get(goal_id=gid, kind="liveness.missed")
    assert missed.data["reason"] == "NO_PROGRESS" and missed.actor == "scheduler"
    # The holder is not interrupted: its lease still renews, the goal still runs.
    body = agent.get(f"goals/{gid}").json()
    assert body["status"] == "running" and body["alert"]["reason"] == "NO_PROGRESS"
    assert agent.post(f"goals/{gid}/lease/heartbeat", {"lease": lease}).status_code == 200
    tasks.sweep_leases()
    assert Event.objects.filter(goal_id=gid, kind="liveness.missed").count() == 1  # said once
    # The next checkpoint clears it.
    answer = agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "moved",
                                                     "progress_pct": 20})
    assert answer.status_code == 201, answer.content
    assert gid not in listed(operator)
    assert agent.get(f"goals/{gid}").json()["alert"] is None


def test_a_goal_that_wakes_but_never_checkpoints_is_listed_no_progress(agent, operator,
                                                                       started, clock):
    """Without a lease the bound is one and a half intervals plus the chunk:
    a goal whose agent takes each wake and lets it go without a checkpoint."""
    gid, lease = started(cadence_minutes=60)
    agent.post(f"goals/{gid}/lease/release", {"lease": lease})
    clock.advance(minutes=60 + 30 + 60 - 1)
    tasks.sweep_leases()
    assert reason(operator, gid) != "NO_PROGRESS"
    clock.advance(minutes=2)
    tasks.sweep_leases()
    assert reason(operator, gid) == "NO_PROGRESS"


def test_an_operator_recover_answers_no_progress_and_restarts_the_clock(agent, operator,
                                                                        started, clock):
    gid, lease = started()
    clock.advance(minutes=61)
    agent.post(f"goals/{gid}/lease/heartbeat", {"lease": lease})
    tasks.sweep_leases()
    assert reason(operator, gid) == "NO_PROGRESS"
    answer = operator.post(f"goals/{gid}/recover", {"reason": "looked: it is compiling"})
    assert answer.status_code == 200, answer.content
    assert gid not in listed(operator)
    clock.advance(minutes=30)
    agent.post(f"goals/{gid}/lease/heartbeat", {"lease": lease})
    tasks.sweep_leases()
    assert gid not in listed(operator)  # the clock starts again at the recovery


def test_a_rate_limit_pause_is_not_a_lack_of_progress(agent, operator, started, clock):
    gid, lease = started()
    reset = clock() + timedelta(hours=5)
    agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                     "error_text": "429 Too Many Requests",
                                     "retry_after": str(int((reset - clock()).total_seconds()))})
    assert agent.get(f"goals/{gid}").json()["status"] == "paused"
    clock.advance(hours=4)
    tasks.sweep_leases()
    assert reason(operator, gid) != "NO_PROGRESS"


# ------------------------------------------------ every fenced call keeps the lease


def test_a_worker_that_checkpoints_every_four_minutes_keeps_a_five_minute_lease(agent,
                                                                               started, clock):
    gid, lease = started()  # lease_seconds 300
    for step in range(1, 6):
        clock.advance(minutes=4)
        answer = agent.post(f"goals/{gid}/checkpoints", {
            "lease": lease, "current_step": f"step {step}", "progress_pct": step * 10})
        assert answer.status_code == 201, (step, answer.content)
        tasks.sweep_leases()
    body = agent.get(f"goals/{gid}").json()
    assert body["status"] == "running" and body["lease"]["generation"] == lease["generation"]
    assert body["lease"]["expires_at"] == iso(clock() + timedelta(seconds=300))
    renewal = Event.objects.filter(goal_id=gid, kind="checkpoint.recorded").last()
    assert renewal.data["lease_expires_at"] == body["lease"]["expires_at"]
    assert not Event.objects.filter(goal_id=gid, kind="lease.expired").exists()


def test_a_run_report_and_a_job_update_keep_the_lease_too(agent, started, clock):
    gid, lease = started()
    clock.advance(minutes=4)
    agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "ok"})
    clock.advance(minutes=4)
    job = agent.post(f"goals/{gid}/jobs", {"lease": lease, "kind": "ci", "ref": "run 9"}).json()
    clock.advance(minutes=4)
    answer = agent.post(f"goals/{gid}/jobs/{job['job']['job_id']}/status",
                        {"lease": lease, "status": "succeeded"})
    assert answer.status_code == 200, answer.content
    clock.advance(minutes=4)
    tasks.sweep_leases()
    body = agent.get(f"goals/{gid}").json()
    assert body["status"] == "running" and body["lease"]["generation"] == lease["generation"]


# ------------------------------------------------ caps on what an agent may choose


@pytest.mark.parametrize(("setting", "value", "cap"), [
    ("lease_seconds", 86_400, "lease_seconds"),
    ("ready_timeout_minutes", 10_080, "ready_timeout_minutes"),
    ("job_deadline_minutes", 43_200, "job_deadline_minutes"),
    ("progress_minutes", 1_440, "progress_minutes"),
])
def test_a_duration_over_its_cap_is_refused_naming_the_cap(agent, clock, setting, value, cap):
    answer = agent.start(policy={setting: value})
    assert answer.status_code == 400, answer.content
    body = answer.json()
    assert body["code"] == "over_cap" and body["cap"] == policy.DEFAULT_CAPS[cap]
    assert str(policy.DEFAULT_CAPS[cap]) in body["detail"]
    assert not Goal.objects.exists()  # nothing recorded


def test_a_hundred_silent_daily_host_slots_are_refused(agent, clock):
    answer = agent.start(policy={"scheduler": "host", "cadence_minutes": 1_440,
                                 "host_silent_slots": 100})
    assert answer.status_code == 400 and answer.json()["code"] == "over_cap"
    assert answer.json()["cap_name"] == "host_silence_minutes"
    # A daily host task with the default two slots is within the cap.
    fine = agent.start(policy={"scheduler": "host", "cadence_minutes": 1_440})
    assert fine.status_code == 201, fine.content


def test_an_operator_sets_the_caps(agent, clock, settings):
    settings.WAKELEDGER_CAPS = {**policy.DEFAULT_CAPS, "lease_seconds": 900}
    assert agent.start(policy={"lease_seconds": 1_200}).json()["code"] == "over_cap"
    assert agent.start(goal_key="ok", policy={"lease_seconds": 900}).status_code == 201


# ------------------------------------------------ receipts near the prepared slot


def _host_goal(agent, started):
    gid, lease = started(scheduler="host", cadence_minutes=60)
    spec = agent.post(f"goals/{gid}/watchdog", {"lease": lease}).json()["host_schedule"]
    return gid, lease, datetime.fromisoformat(spec["first_due_at"])


@pytest.mark.parametrize("shift", [timedelta(days=365), timedelta(hours=3), -timedelta(hours=3),
                                   timedelta(days=-30)])
def test_a_receipt_far_from_the_prepared_slot_is_refused(agent, started, clock, shift):
    gid, lease, due = _host_goal(agent, started)
    before = Event.objects.filter(goal_id=gid).count()
    answer = agent.post(f"goals/{gid}/watchdog/receipts", {
        "lease": lease, "status": "created", "host_ref": "cron-1", "due_at": iso(due + shift)})
    assert answer.status_code == 400, answer.content
    assert answer.json()["code"] == "receipt_due_at_mismatch"
    assert answer.json()["expected_due_at"] == iso(due)
    assert Event.objects.filter(goal_id=gid).count() == before
    # The task's real next run is taken, in any offset, a few minutes either way.
    answer = agent.post(f"goals/{gid}/watchdog/receipts", {
        "lease": lease, "status": "created", "host_ref": "cron-1",
        "due_at": (due + timedelta(minutes=7)).astimezone().isoformat()})
    assert answer.status_code == 200, answer.content


# ------------------------------------------------ a wake whose task always raises


def _poisoned(monkeypatch, gid: str) -> None:
    """A bug that hits one goal only: its wake task raises every time."""
    real = tasks.wakes.fire

    def fire(goal_id, *args, **kwargs):
        if goal_id == gid:
            raise RuntimeError("row data this code cannot read")
        return real(goal_id, *args, **kwargs)

    monkeypatch.setattr(tasks.wakes, "fire", fire)


def _run_due_row(name: str, clock) -> None:
    """What django-q2's scheduler and a worker do with a due row: a task of
    the row's group runs in django-q2's own worker; a failure is recorded as
    its monitor records one (a Task with success False, the error and its
    traceback as result). The worker runs in "sync" mode to keep the test's
    transaction open, which re-raises instead of queueing the result."""
    row = Schedule.objects.get(name=name)
    args = eval(row.args)  # noqa: S307 (our own literal: the goal id)
    task = {"id": uuid.uuid4().hex, "name": f"fire-{uuid.uuid4().hex[:8]}", "func": row.func,
            "args": args if isinstance(args, tuple) else (args,),
            "kwargs": {"intended_date": row.next_run.isoformat()}, "group": name,
            "started": clock(), "sync": True}
    todo, done = queue.Queue(), queue.Queue()
    todo.put(task)
    todo.put("STOP")
    try:
        worker(todo, done, Value("f", -1))
    except Exception as error:
        save_task({**task, "result": f"{error} : {traceback.format_exc()}", "success": False,
                   "stopped": clock()}, get_broker())
    while row.next_run <= clock():
        row.next_run = row.calculate_next_run(row.next_run)
    row.save()


def test_a_wake_whose_task_always_raises_is_listed_after_a_few_repairs(
        agent, operator, started, clock, monkeypatch):
    gid, lease = started(cadence_minutes=60)
    agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "half",
                                            "progress_pct": 50, "release_lease": True})
    _poisoned(monkeypatch, gid)
    name = Goal.objects.get(pk=gid).state["watchdog"]["schedule_name"]
    clock.advance(minutes=60)
    repairs = 0
    for _ in range(12):  # two hours of a scheduler that fires the row and a sweeper
        _run_due_row(name, clock)
        clock.advance(minutes=6)
        tasks.sweep_leases()
        repairs = Event.objects.filter(goal_id=gid, data__repair="late").count()
        if reason(operator, gid) == "WAKE_NOT_FIRING":
            break
    assert repairs == MAX_REPAIRS
    row = listed(operator)[gid]
    assert row["reason"] == "WAKE_NOT_FIRING"
    missed = Event.objects.get(goal_id=gid, kind="liveness.missed")
    assert missed.data["last_error"] == "RuntimeError" and missed.data["schedule_name"] == name
    assert "RuntimeError" in missed.data["detail"]  # the goal's history says why
    # Listed: no more repairs, however long nobody acts.
    for _ in range(10):
        clock.advance(minutes=6)
        tasks.sweep_leases()
    assert Event.objects.filter(goal_id=gid, data__repair="late").count() == MAX_REPAIRS
    # The bug is fixed; an operator wakes the goal: the wake fires, the alert ends.
    monkeypatch.undo()
    answer = operator.post(f"goals/{gid}/wake", {"reason": "fixed the row reader"})
    assert answer.status_code == 200, answer.content
    assert gid not in listed(operator)


# ------------------------------------------------ a ready goal with a tracked job


def test_a_ready_goal_waits_for_its_own_ready_deadline_not_a_jobs(agent, operator, started,
                                                                  clock):
    gid, lease = started(cadence_minutes=60, ready_timeout_minutes=120,
                         job_deadline_minutes=90)
    agent.post(f"goals/{gid}/jobs", {"lease": lease, "kind": "ci", "ref": "run 3"})
    agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "pushed",
                                            "progress_pct": 30, "release_lease": True})
    name = Goal.objects.get(pk=gid).state["watchdog"]["schedule_name"]
    clock.advance(minutes=60)
    _run_due_row(name, clock)  # the slot is due: ready for its agent's pull
    assert agent.get(f"goals/{gid}").json()["liveness"] == "ready"
    clock.advance(minutes=40)  # past the job's deadline (90), long before the ready one (180)
    tasks.sweep_leases()
    body = agent.get(f"goals/{gid}").json()
    assert body["status"] != "blocked", body
    assert reason(operator, gid) == "JOB_SILENT"
    clock.advance(minutes=81)
    tasks.sweep_leases()
    assert agent.get(f"goals/{gid}").json()["reason"] == "READY_UNCLAIMED"



# ------------------------------------------------ a push wake nobody sent


def test_a_push_wake_no_sender_took_before_its_lease_expired_started_nothing(
        agent, operator, started, clock, settings):
    """An operator wakes a push goal from the web while the scheduler is down:
    the outbox row waits for a sender that does not come. When the sweeper is
    back, the lease has long expired — but nobody ever received it, so the goal
    is not INTERRUPTED_UNKNOWN (found by the simulation): the row is
    recorded as a dispatch that started nothing and the goal waits."""
    settings.WAKELEDGER_DISPATCHERS = {"hook": {"type": "webhook",
                                                "url": "https://hooks.invalid/wake",
                                                "secret": "s" * 32}}
    gid, lease = started(dispatch="hook")
    agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "half",
                                            "progress_pct": 50, "release_lease": True})
    answer = operator.post(f"goals/{gid}/wake", {"reason": "go on"})
    assert answer.status_code == 200 and answer.json()["outcome"] == "recurring_acquired"
    row = Dispatch.objects.get(goal_id=gid)
    assert row.status == Dispatch.PENDING
    clock.advance(hours=3)  # the scheduler was down: no sender, no sweep
    tasks.sweep_leases()
    body = agent.get(f"goals/{gid}").json()
    assert body["status"] == "waiting" and body["reason"] != "INTERRUPTED_UNKNOWN", body
    row.refresh_from_db()
    assert row.status == Dispatch.FAILED and "never sent" in row.detail
    dispatched = Event.objects.get(goal_id=gid, kind="continuation.dispatched")
    assert dispatched.data["ok"] is False and dispatched.data["uncertain"] is False


# ------------------------------------------------ the database down for minutes


def test_a_holder_whose_heartbeats_met_a_database_outage_is_not_judged_silent(
        agent, started, clock):
    """No sweep and no write for twelve minutes: the database was down, and the
    holder's heartbeats were refused with everything else. Its lease went stale
    in the outage; the first sweeps back give it five minutes to reconnect
    before its lease is expired as silent (found by the simulation)."""
    gid, lease = started()  # 300 s lease, 60 s grace
    tasks.sweep_leases()  # a sweep before the outage
    clock.advance(minutes=12)  # the outage: nothing recorded, no sweep
    tasks.sweep_leases()
    assert agent.get(f"goals/{gid}").json()["status"] == "running"
    clock.advance(minutes=1)
    assert agent.post(f"goals/{gid}/lease/heartbeat", {"lease": lease}).status_code == 200
    tasks.sweep_leases()
    assert agent.get(f"goals/{gid}").json()["lease"]["generation"] == lease["generation"]


def test_a_holder_that_stays_silent_after_an_outage_expires_after_the_grace(
        agent, started, clock):
    gid, _lease = started()
    tasks.sweep_leases()
    clock.advance(minutes=12)
    tasks.sweep_leases()
    for _ in range(5):
        clock.advance(minutes=1)
        tasks.sweep_leases()
    assert Event.objects.filter(goal_id=gid, kind="lease.expired").exists()
