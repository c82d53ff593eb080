"""What happens when a goal's deadline passes (docs/design.md, "Liveness").

``ledger.domain.liveness`` says what each goal waits for and by when; this
module decides, for the sweeper (every minute) and ``ledger doctor --fix``,
what a missed deadline changes — always as events, with the reason:

- a lease past its stale point: ``lease.expired`` (or INTERRUPTED_UNKNOWN for a
  silent continuation, the uncertain-attempt rule), and on an internal goal a one-off
  ``timeout_recovery`` wake due at once, so a crashed agent's goal resumes in
  minutes instead of at the next recurring slot. A running blocking job no
  longer keeps a silent holder's lease alive: the resume packet names it;
- a blocking job past its deadline: ``liveness.missed`` JOB_SILENT (alerted);
- a ready goal nobody pulled: ``goal.blocked`` READY_UNCLAIMED;
- a host watchdog that missed its slots: ``liveness.missed`` HOST_SILENT;
- no checkpoint by the progress deadline: ``liveness.missed`` NO_PROGRESS
  (listed; the holder keeps its lease, the next checkpoint clears it);
- an internal wake whose django-q2 row is missing, exhausted or late (facts
  the shell gathered): the row is recreated by a repair event on the goal —
  at most MAX_REPAIRS times without a fire between them, then ``liveness.missed``
  WAKE_NOT_FIRING with the row's facts (a wake whose task fails every time
  would otherwise be repaired forever, a new lateness window each time);
- an internal goal nothing will fire: its watchdog is armed.
"""

from dataclasses import dataclass
from datetime import datetime

from ledger.domain import liveness, progress, timing
from ledger.domain.codec import Payload, event_kind, optional
from ledger.domain.endings import GoalBlocked
from ledger.domain.events import Changes, Event, Style, iso
from ledger.domain.interruptions import interrupted, interrupted_events, lease_expired_event
from ledger.domain.leases import lease_stale_at
from ledger.domain.parts import LivenessAlert, iso_text
from ledger.domain.requested import one_off_wake
from ledger.domain.state import LONG_PAUSE, GoalState
from ledger.domain.text import clean, known, short
from ledger.domain.watchdogs import INTERNAL, ReceiptRecorded, WakeScheduled, arm_events


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """A django-q2 row as the shell found it (the domain never reads tables)."""

    name: str
    exists: bool
    fires: bool = True  # our task for this goal, with repeats left
    next_run: str = ""  # ISO
    # The exception type of the row's last failed task ("" when none failed
    # since its last success): django-q2 keeps it in its own table, where no
    # operator looks, so the alert carries it.
    last_error: str = ""


@dataclass(frozen=True, slots=True)
class CheckLiveness:
    """The sweeper: act on every deadline of this goal that passed. ``rows``:
    the goal's internal schedule rows (``expected_schedules``), or None when
    the shell did not look (then no row is repaired)."""

    rows: tuple[ScheduleRow, ...] | None = None
    # Rows named after this goal that its projection does not expect (a
    # leftover of a crash, a restore, a hand-written row): deleted, recorded.
    orphans: tuple[str, ...] = ()
    # An operator's repair (`ledger doctor --fix`): repairs even a wake listed
    # WAKE_NOT_FIRING, once more, and counts its repairs from one again.
    by_operator: bool = False
    # When no sweep completed (the scheduler or the database was down), from
    # the last beat before the silence to the first pass after it: the server
    # may not have heard its clients then (``leases.unheard_grace``).
    unheard: tuple[datetime, datetime] | None = None


# Repairs of one wake with no fire between them before it is listed
# WAKE_NOT_FIRING instead of repaired again (each repair gives the scheduler a
# fresh lateness window: three are a quarter of an hour of "due soon").
MAX_REPAIRS = 3


def check(state: GoalState, cmd: CheckLiveness, now: datetime) -> list[Event]:
    events = _orphans(state, cmd.orphans, now)
    if state.terminal:
        return events
    events += _silent_jobs(state, now)
    acted = _deadlines(state, cmd, now)
    # NO_PROGRESS only when nothing more specific was said this pass (a goal
    # that blocks, or whose host went silent, is listed with that reason).
    if not any(isinstance(event.payload, LivenessMissed | GoalBlocked) for event in acted):
        acted += _no_progress(state, now)
    if not acted:
        acted += _long_pause(state, now)
    return acted + events if state.lease is not None else events + acted


def _deadlines(state: GoalState, cmd: CheckLiveness, now: datetime) -> list[Event]:
    if state.lease is not None:
        return _lease(state, now, cmd.unheard)
    if state.ready is not None:
        # Its own deadline: a tracked job's earlier one is JOB_SILENT's, never
        # READY_UNCLAIMED's.
        if state.status != "blocked" and now >= liveness.ready_deadline(state):
            minutes = state.setting("ready_timeout_minutes")
            return [Event(GoalBlocked(
                summary=f"a due wake ({state.ready.reason}) waited {minutes} min and "
                        f"nobody pulled it: {liveness.READY_UNCLAIMED}",
                generation=0, reason=liveness.READY_UNCLAIMED, keeps_ready=True), now)]
        return []
    if state.status == "blocked" or state.finish_requested:
        return []  # a human's turn: nothing else is due
    if state.scheduler_backend == "host":
        return _host(state, now)
    return _internal(state, cmd, now)


def _lease(state: GoalState, now: datetime,
           unheard: tuple[datetime, datetime] | None = None) -> list[Event]:
    stale_at = lease_stale_at(state, unheard)
    if stale_at is None or now < stale_at:
        return []
    if interrupted(state, now, unheard):
        return interrupted_events(state, now)
    events = [lease_expired_event(state, now)]
    if state.setting("scheduler") == INTERNAL:
        # Resume in minutes, not at the next recurring slot (smart-wake's
        # short cron wake): a one-off wake due now, charged as recovery by the
        # claim (the continuation budget: the lease expired).
        events += one_off_wake(state, now, "timeout_recovery", now,
                               requested_by="liveness")
    return events


def _silent_jobs(state: GoalState, now: datetime) -> list[Event]:
    events = []
    for job in state.running_jobs():
        deadline = liveness.job_deadline(state, job)
        if not job.get("silent_at") and now >= deadline:
            events.append(Event(LivenessMissed(
                reason=liveness.JOB_SILENT, expected=liveness.JOB_REPORT,
                deadline=iso(deadline), job_id=job["job_id"],
                detail=f"{job['kind']} {job['ref']} was not reported by its deadline"), now))
    return events


def _no_progress(state: GoalState, now: datetime) -> list[Event]:
    expected = liveness.progress_expectation(state)
    if expected is None or expected.deadline is None or now < expected.deadline:
        return []
    # What it went through meanwhile is told: lease grants, empty turns,
    # checkpoints that changed nothing, job ends (ledger.domain.progress).
    return [Event(LivenessMissed(
        reason=liveness.NO_PROGRESS, expected=liveness.CHECKPOINT,
        deadline=iso(expected.deadline), detail=expected.detail,
        last_progress=iso(liveness.progress_since(state)),
        since_progress=progress.summary(state)), now)]


def _long_pause(state: GoalState, now: datetime) -> list[Event]:
    expected = liveness.pause_expectation(state)
    if expected is None or expected.deadline is None or now < expected.deadline:
        return []
    return [Event(LivenessMissed(
        reason=LONG_PAUSE, expected=liveness.SCHEDULER_FIRE, deadline=iso(expected.deadline),
        detail=expected.detail, due_at=iso_text(state.paused_until)), now)]


def _host(state: GoalState, now: datetime) -> list[Event]:
    # The host's own deadline: the goal's earliest may be its progress
    # deadline, which says nothing of the host (seed 2, 30 days: a host firing
    # on schedule listed HOST_SILENT, its agent told to re-create its task).
    expected = liveness.host_expectation(state)
    # HOST_SILENT says more than NO_PROGRESS (what to re-create): it replaces it.
    if state.alert_reason not in ("", liveness.NO_PROGRESS) \
            or expected.deadline is None or now < expected.deadline:
        return []
    watchdog = state.watchdog
    missed = watchdog.next_due_at if watchdog is not None and watchdog.status == "live" else None
    return [Event(LivenessMissed(reason=liveness.HOST_SILENT, expected=liveness.HOST_CLAIM,
                                 deadline=iso(expected.deadline), detail=expected.detail,
                                 missed_since=iso(missed) if missed else None),
                  now)]


# ---------------------------------------------------------------- internal rows


def expected_schedules(state: GoalState) -> dict[str, str]:
    """The django-q2 rows this goal's projection says exist: name -> due (ISO)."""
    names: dict[str, str] = {}
    watchdog = state.watchdog
    if (watchdog is not None and watchdog.backend == INTERNAL
            and watchdog.status in timing.FIRING and watchdog.schedule_name):
        names[watchdog.schedule_name] = iso_text(watchdog.next_due_at)
    for wake in timing.one_off_wakes(state):
        if wake.schedule_name:
            names[wake.schedule_name] = iso(wake.due_at)
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


def repairs(state: GoalState, rows: tuple[ScheduleRow, ...], now: datetime,
            by_operator: bool = False) -> list[Event]:
    """Events that recreate every row of this goal that will not fire on time,
    or list the goal WAKE_NOT_FIRING for a wake repaired MAX_REPAIRS times
    without a fire between them."""
    found = {row.name: row for row in rows}
    events: list[Event] = []
    for name, due in expected_schedules(state).items():
        row = found.get(name)
        problem = row_problem(due, row, now)
        if not problem:
            continue
        count = 0 if by_operator else _repairs_of(state, name)
        if count >= MAX_REPAIRS:
            if state.alert_reason != liveness.WAKE_NOT_FIRING:
                events.append(_not_firing(name, due, problem, count, row, now))
            continue
        note = f"repaired: the schedule row was {problem}"
        if state.watchdog is not None and name == state.watchdog.schedule_name:
            # The owed slot itself (its due time, maybe past): django-q2 fires
            # it at once with that intended time, and steps on from there, on
            # the anchor's grid (a row due "now" would shift every later slot).
            events.append(Event(ReceiptRecorded(
                backend=INTERNAL, status="created", schedule_name=name,
                due_at=due or iso(now), note=note, repair=problem, attempt=count + 1), now))
        else:
            reset = state.reset_wake is not None and state.reset_wake.schedule_name == name
            wake = state.reset_wake if reset else state.requested_wake
            assert wake is not None  # expected_schedules named it
            events.append(Event(WakeScheduled(
                kind="reset" if reset else "requested", due_at=iso(wake.due_at),
                schedule_name=name, repair=problem, attempt=count + 1,
                reason=None if reset else wake.reason or "timeout_recovery"), now))
    return events


def _repairs_of(state: GoalState, name: str) -> int:
    """How often this wake's row was repaired since it last fired."""
    for wake in (state.watchdog, state.reset_wake, state.requested_wake):
        if wake is not None and wake.schedule_name == name:
            return wake.repairs or 0
    return 0


def _not_firing(name: str, due: str, problem: str, count: int, row: ScheduleRow | None,
                now: datetime) -> Event:
    error = row.last_error if row is not None else ""
    detail = (f"its schedule row {name} (due {due or '-'}) was repaired {count} times and "
              f"never fired; it is {problem} again"
              + (f"; its task last failed with {error}" if error else ""))
    return Event(LivenessMissed(
        reason=liveness.WAKE_NOT_FIRING, expected=liveness.SCHEDULER_FIRE,
        schedule_name=name, due_at=due, problem=problem, repairs=count,
        last_error=error, detail=detail), now)


def _orphans(state: GoalState, names: tuple[str, ...], now: datetime) -> list[Event]:
    expected = expected_schedules(state)
    return [Event(ReceiptRecorded(
        backend=INTERNAL, status="cancelled", schedule_name=name,
        note="repaired: a schedule row the projection does not expect was deleted",
        repair="orphaned"), now) for name in names if name not in expected]


def _internal(state: GoalState, cmd: CheckLiveness, now: datetime) -> list[Event]:
    if timing.nothing_fires(state):
        return arm_events(state, state.interval_seconds, iso(now), now)
    if cmd.rows is None:
        return []
    if state.alert_reason == liveness.WAKE_NOT_FIRING and not cmd.by_operator:
        return []  # listed: repaired no more until a human acts
    return repairs(state, cmd.rows, now, cmd.by_operator)


# ---------------------------------------------------------------- the kind


@event_kind("liveness.missed")
@dataclass(frozen=True, slots=True, kw_only=True)
class LivenessMissed(Payload):
    """A deadline passed without its evidence; the facts each reason has."""

    STYLE = Style("liveness")

    reason: str  # JOB_SILENT | NO_PROGRESS | HOST_SILENT | WAKE_NOT_FIRING | LONG_PAUSE
    expected: str
    detail: str
    deadline: str | None = optional()
    job_id: str | None = optional()  # JOB_SILENT
    last_progress: str | None = optional()  # NO_PROGRESS
    missed_since: str | None = optional()  # HOST_SILENT, with a live watchdog
    schedule_name: str | None = optional()  # WAKE_NOT_FIRING: the row, its due time,
    due_at: str | None = optional()  # (LONG_PAUSE: the reset it waits for)
    problem: str | None = optional()  # what is wrong with it,
    repairs: int | None = optional()  # how often it was repaired,
    last_error: str | None = optional()  # and its task's last exception type
    # NO_PROGRESS: what the goal went through since its last progress (lease
    # grants, empty turns, checkpoints that changed nothing, job ends).
    since_progress: dict[str, int] | None = optional()

    def fold(self, state: GoalState, at: datetime) -> Changes:
        """liveness.missed: HOST_SILENT stands on the goal until its host is heard
        from; JOB_SILENT marks the job, until it is reported."""
        if self.reason == liveness.JOB_SILENT:
            silent = iso(at)
            return {"jobs": [{**job, "silent_at": silent} if job["job_id"] == self.job_id
                             else job for job in state.jobs]}
        # The facts its reason has (an empty last_error says the task never failed).
        return {"liveness_alert": LivenessAlert(
            reason=self.reason, at=at, detail=self.detail,
            missed_since=_time(self.missed_since), last_progress=_time(self.last_progress),
            schedule_name=self.schedule_name or None, last_error=self.last_error or None,
            since_progress=self.since_progress or None,
            # LONG_PAUSE: the reset it waits for.
            paused_until=_time(self.due_at) if self.reason == LONG_PAUSE else None)}

    def line(self) -> str:
        return (f"{known(self.reason)}: {clean(known(self.detail))} "
                f"(deadline {short(self.deadline)})")


def _time(text: str | None) -> datetime | None:
    """A fact's time as the alert keeps it (None for none)."""
    return datetime.fromisoformat(text) if text else None
