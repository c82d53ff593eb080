"""What happens when a goal's deadline passes (DESIGN section 6, "Liveness").

``ledger.domain.liveness`` says what each goal waits for and by when; this
module decides, for the sweeper (every minute) and ``ledger doctor --fix``,
what a missed deadline changes — always as events, with the reason:

- a lease past its stale point: ``lease.expired`` (or INTERRUPTED_UNKNOWN for a
  silent continuation, rule 6), and on an internal goal a one-off
  ``timeout_recovery`` wake due at once, so a crashed agent's goal resumes in
  minutes instead of at the next recurring slot. A running blocking job no
  longer keeps a silent holder's lease alive: the resume packet names it;
- a blocking job past its deadline: ``liveness.missed`` JOB_SILENT (alerted);
- a ready goal nobody pulled: ``goal.blocked`` READY_UNCLAIMED;
- a host watchdog that missed its slots: ``liveness.missed`` HOST_SILENT;
- an internal wake whose django-q2 row is missing, exhausted or late (facts
  the shell gathered): the row is recreated by a repair event on the goal;
- an internal goal nothing will fire: its watchdog is armed.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledger.domain import liveness, timing
from ledger.domain.events import (
    GOAL_BLOCKED,
    LIVENESS_MISSED,
    RECEIPT_RECORDED,
    WAKE_SCHEDULED,
    Event,
    iso,
)
from ledger.domain.interruptions import interrupted, interrupted_events, lease_expired_event
from ledger.domain.leases import lease_stale_at
from ledger.domain.requested import one_off_wake
from ledger.domain.state import GoalState
from ledger.domain.watchdogs import INTERNAL, arm_events, interval_of


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """A django-q2 row as the shell found it (the domain never reads tables)."""

    name: str
    exists: bool
    fires: bool = True  # our task for this goal, with repeats left
    next_run: str = ""  # ISO


@dataclass(frozen=True, slots=True)
class CheckLiveness:
    """The sweeper: act on every deadline of this goal that passed. ``rows``:
    the goal's internal schedule rows (``expected_schedules``), or None when
    the shell did not look (then no row is repaired)."""

    rows: tuple[ScheduleRow, ...] | None = None
    # Rows named after this goal that its projection does not expect (a
    # leftover of a crash, a restore, a hand-written row): deleted, recorded.
    orphans: tuple[str, ...] = ()


def check(state: GoalState, cmd: CheckLiveness, now: datetime) -> list[Event]:
    events = _orphans(state, cmd.orphans, now)
    if state.terminal:
        return events
    events += _silent_jobs(state, now)
    if state.lease:
        return _lease(state, now) + events
    if state.ready:
        expected = liveness.expectation(state)
        if state.status != "blocked" and expected.label == liveness.READY \
                and expected.deadline is not None and now >= expected.deadline:
            minutes = state.setting("ready_timeout_minutes")
            events.append(Event(GOAL_BLOCKED, {
                "summary": f"a due wake ({state.ready['reason']}) waited {minutes} min and "
                           f"nobody pulled it: {liveness.READY_UNCLAIMED}",
                "generation": 0, "reason": liveness.READY_UNCLAIMED}, now))
        return events
    if state.status == "blocked" or state.finish_requested:
        return events  # a human's turn: nothing else is due
    backend = state.watchdog.get("backend") or state.setting("scheduler")
    if backend == "host":
        return events + _host(state, now)
    return events + _internal(state, cmd, now)


def _lease(state: GoalState, now: datetime) -> list[Event]:
    stale_at = lease_stale_at(state)
    if stale_at is None or now < stale_at:
        return []
    if interrupted(state, now):
        return interrupted_events(state, now)
    events = [lease_expired_event(state, now)]
    if state.setting("scheduler") == INTERNAL:
        # Resume in minutes, not at the next recurring slot (smart-wake's
        # short cron wake): a one-off wake due now, charged as recovery by the
        # claim (rule 5: the lease expired).
        events += one_off_wake(state, now, "timeout_recovery", now,
                               requested_by="liveness")
    return events


def _silent_jobs(state: GoalState, now: datetime) -> list[Event]:
    events = []
    for job in state.running_jobs():
        deadline = liveness.job_deadline(state, job)
        if not job.get("silent_at") and now >= deadline:
            events.append(Event(LIVENESS_MISSED, {
                "reason": liveness.JOB_SILENT, "expected": liveness.JOB_REPORT,
                "deadline": iso(deadline), "job_id": job["job_id"],
                "detail": f"{job['kind']} {job['ref']} was not reported by its deadline"}, now))
    return events


def _host(state: GoalState, now: datetime) -> list[Event]:
    expected = liveness.expectation(state)
    if state.liveness_alert or expected.deadline is None or now < expected.deadline:
        return []
    data: dict[str, Any] = {"reason": liveness.HOST_SILENT, "expected": liveness.HOST_CLAIM,
                            "deadline": iso(expected.deadline), "detail": expected.detail}
    if state.watchdog.get("status") == "live" and state.watchdog.get("next_due_at"):
        data["missed_since"] = state.watchdog["next_due_at"]
    return [Event(LIVENESS_MISSED, data, now)]


# ---------------------------------------------------------------- internal rows


def expected_schedules(state: GoalState) -> dict[str, str]:
    """The django-q2 rows this goal's projection says exist: name -> due (ISO)."""
    names: dict[str, str] = {}
    watchdog = state.watchdog
    if (watchdog.get("backend") == INTERNAL and watchdog.get("status") in timing.FIRING
            and watchdog.get("schedule_name")):
        names[watchdog["schedule_name"]] = watchdog.get("next_due_at", "")
    for wake in timing.one_off_wakes(state):
        if wake.get("schedule_name"):
            names[wake["schedule_name"]] = wake["due_at"]
    return names


def row_problem(due: str, row: ScheduleRow | None, now: datetime) -> str:
    """Why a row will not fire its wake on time ("" when it will, or cannot
    be told yet). From its due time until the scheduler's lateness is over, a
    wake may be in flight: django-q2 has already moved its row on (or deleted
    a ONCE row) and the task waits in the queue for a worker to claim it. Only
    an exhausted row is certain at once; a missing or later row only before
    its due time or after its lateness."""
    if row is not None and row.exists and not row.fires:
        return "exhausted"  # repeats 0 (django-q2 skips it forever) or not our task
    if due:
        moment = datetime.fromisoformat(due)
        if moment <= now <= moment + liveness.SCHEDULER_LATENESS:
            return ""
    if row is None or not row.exists:
        return "missing"
    if due and row.next_run and datetime.fromisoformat(row.next_run) > \
            datetime.fromisoformat(due) + liveness.SCHEDULER_LATENESS:
        return "late"
    return ""


def repairs(state: GoalState, rows: tuple[ScheduleRow, ...], now: datetime) -> list[Event]:
    """Events that recreate every row of this goal that will not fire on time."""
    found = {row.name: row for row in rows}
    events = []
    for name, due in expected_schedules(state).items():
        problem = row_problem(due, found.get(name), now)
        if not problem:
            continue
        note = f"repaired: the schedule row was {problem}"
        if name == state.watchdog.get("schedule_name"):
            # The owed slot itself (its due time, maybe past): django-q2 fires
            # it at once with that intended time, and steps on from there, on
            # the anchor's grid (a row due "now" would shift every later slot).
            events.append(Event(RECEIPT_RECORDED, {
                "backend": INTERNAL, "status": "created", "schedule_name": name,
                "due_at": due or iso(now), "note": note, "repair": problem}, now))
        else:
            wake = state.reset_wake if state.reset_wake.get("schedule_name") == name \
                else state.requested_wake
            data = {"kind": "reset" if wake is state.reset_wake else "requested",
                    "due_at": wake["due_at"], "schedule_name": name, "repair": problem}
            if data["kind"] == "requested":
                data["reason"] = wake.get("reason", "timeout_recovery")
            events.append(Event(WAKE_SCHEDULED, data, now))
    return events


def _orphans(state: GoalState, names: tuple[str, ...], now: datetime) -> list[Event]:
    expected = expected_schedules(state)
    return [Event(RECEIPT_RECORDED, {
        "backend": INTERNAL, "status": "cancelled", "schedule_name": name,
        "note": "repaired: a schedule row the projection does not expect was deleted",
        "repair": "orphaned"}, now) for name in names if name not in expected]


def _internal(state: GoalState, cmd: CheckLiveness, now: datetime) -> list[Event]:
    if timing.nothing_fires(state):
        return arm_events(state, interval_of(state), iso(now), now)
    if cmd.rows is None:
        return []
    return repairs(state, cmd.rows, now)


# ---------------------------------------------------------------- evolve


def missed(state: GoalState, data: dict[str, Any], at: str) -> dict[str, Any]:
    """liveness.missed: HOST_SILENT stands on the goal until its host is heard
    from; JOB_SILENT marks the job, until it is reported."""
    if data["reason"] == liveness.JOB_SILENT:
        return {"jobs": [{**job, "silent_at": at} if job["job_id"] == data["job_id"] else job
                         for job in state.jobs]}
    return {"liveness_alert": {"reason": data["reason"], "at": at, "detail": data["detail"],
                               **({"missed_since": data["missed_since"]}
                                  if "missed_since" in data else {})}}
