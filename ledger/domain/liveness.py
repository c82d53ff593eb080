"""Liveness proven by evidence (docs/design.md, "Liveness"): what each goal waits
for, and by when.

A state label is not proof. Every non-terminal goal has, at every moment, one
**next expected evidence** with a **deadline**, computed here from its state
alone (so the deadline is a projected, indexed column the sweeper can query):

- a lease: a heartbeat or checkpoint before the lease's stale point;
- a running blocking job: its report before the job's own deadline;
- a ready goal: its agent's pull within ``ready_timeout_minutes`` (policy);
- an internal wake (watchdog slot, reset or requested wake): the scheduler
  firing it within ``SCHEDULER_LATENESS`` of its due time;
- a host watchdog: the host claiming its slot; ``host_silent_slots`` missed
  slots (each allowed half an interval of lateness) make it HOST_SILENT;
- a goal that needs a human: an operator, with no deadline — it is listed.

Beside these (presence), every active goal has a **progress deadline**
(docs/liveness.md): a checkpoint within ``progress_minutes`` of holding a lease, or
within one and a half watchdog intervals plus that without a lease. Heartbeats never
satisfy it; past it the goal is listed NO_PROGRESS without interrupting its
holder, and the next checkpoint clears it.

What happens when a deadline passes is decided in ``ledger.domain.overdue``
(recorded as events, by the sweeper). ``attention`` is the one truth for
"needs a human": /alerts, ``ledger alerts``, ``ledger doctor``, the dashboard
and the API's ``liveness`` field all come from it and from ``label``.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from ledger.domain import clocksteps, progress, timing
from ledger.domain.events import iso
from ledger.domain.leases import lease_stale_at
from ledger.domain.state import BLOCKED, FAILED, LONG_PAUSE, PAUSED, GoalState

# Labels (the API's ``liveness`` field).
WORKING = "working"  # a live lease
EXPIRED = "expired"  # a lease past its expiry the sweeper has not recorded yet
SCHEDULED = "scheduled"  # a wake will fire (internal) or the host will claim a slot
READY = "ready"  # a due wake waits for its agent to pull it
NEEDS_HUMAN = "needs_human"  # listed in /alerts with a reason
OVERDUE = "overdue"  # its deadline passed and nothing acted: listed in /alerts
TERMINAL = "terminal"
LABELS = (WORKING, EXPIRED, SCHEDULED, READY, NEEDS_HUMAN, OVERDUE, TERMINAL)

# Evidence codes: what the goal waits for.
HEARTBEAT = "heartbeat"
JOB_REPORT = "job_report"
PULL = "pull"
SCHEDULER_FIRE = "scheduler_fire"
HOST_CLAIM = "host_claim"
OPERATOR = "operator"
CHECKPOINT = "checkpoint"

# Alert reasons that are not blocked statuses: the goal may still move (an
# agent contact re-creates the host task; a job report clears it), but a
# human should look. Recorded by ``liveness.missed`` events.
HOST_SILENT = "HOST_SILENT"
JOB_SILENT = "JOB_SILENT"
# a goal that made no progress by its progress deadline, and a wake
# whose schedule row was repaired MAX_REPAIRS times without ever firing.
NO_PROGRESS = "NO_PROGRESS"
WAKE_NOT_FIRING = "WAKE_NOT_FIRING"
# Alerts a checkpoint answers (the goal moves again).
PROGRESS_ENDS = frozenset({NO_PROGRESS, WAKE_NOT_FIRING})
# A blocked reason: a due wake nobody pulled in time.
READY_UNCLAIMED = "READY_UNCLAIMED"
# Read-time only: a deadline passed and no sweeper recorded why (the
# scheduler is down, or a bug). Never stored; computed from the deadline.
OVERDUE_REASON = "OVERDUE"
PENDING_CLEANUP = "PENDING_NATIVE_CLEANUP"
# Ended goals an operator should still look at (recover takes AUTH_FAILED).
FAILURES_FOR_A_HUMAN = frozenset({"AUTH_FAILED", "OWNER_VERIFICATION"})

# The internal scheduler looks at its rows every 30 s and the sweeper runs
# every minute: a wake not fired five minutes after it was due is missed.
SCHEDULER_LATENESS = timedelta(minutes=5)
# How long a passed deadline may wait for the sweeper (every minute) before
# the goal reads "overdue": two sweeps.
SWEEP_SLACK = timedelta(minutes=2)

# Why, and what to do, per reason: the text /alerts, `ledger alerts`, the
# dashboard and the timeline show.
WHY = {
    "BLOCKED_APPROVAL": "waits for an approval decision: approve or reject the gate",
    "RATE_LIMIT_STOPPED": "rate limited with the continuation budget spent: recover it after "
                          "the provider's window resets",
    "CONTINUATION_STOPPED": "the continuation budget is spent: recover it to grant a new one",
    "INTERRUPTED_UNKNOWN": "a continuation went silent and may have done something: check "
                           "its side effects, then recover it",
    "WAKE_RETRIES_EXHAUSTED": "woke repeatedly without progress: find out why its agent "
                              "makes none, then recover it",
    "SESSION_CHANGED": "the agent's session changed: confirm the new one, then recover it",
    "SESSION_ACTIVITY": "a later turn finished by hand: recover it if the work should go on",
    "UNCLASSIFIED": "a run failed for an unknown reason: read its run report, then recover it",
    "REQUEST_TOO_LARGE": "one request exceeds the provider's per-minute limit, so waiting "
                         "never helps: shrink the context or raise the limit, then recover it",
    "AUTH_FAILED": "authentication failed: fix the agent's credentials, then recover it",
    "OWNER_VERIFICATION": "the account owner must verify the account",
    PENDING_CLEANUP: "finished; its host watchdog must be deleted and the receipt recorded",
    "AGENT_BLOCKED": "the agent said it cannot go on: fix the cause, then recover it",
    READY_UNCLAIMED: "a due wake waited for its agent and nobody pulled it: check that the "
                     "agent (or its host) still polls, then recover it",
    HOST_SILENT: "its host watchdog stopped claiming slots: the agent's next contact is told "
                 "to re-create it; check the host's scheduled task",
    JOB_SILENT: "a blocking job was never reported by its deadline: inspect the job and "
                "report its status (or recover the goal to write it off)",
    NO_PROGRESS: "no progress by its progress deadline: no checkpoint that changed what is "
                 "recorded (heartbeats, lease grants, repeated checkpoints and job ends do "
                 "not count): look at what its agent is doing; progress clears this",
    LONG_PAUSE: "paused until a provider's reset days away: wake it (`ledger wake`), stop "
                "it, or recover it to let it wait (asked again if the pause still lasts)",
    WAKE_NOT_FIRING: "its wake's schedule row was repaired several times and never fired: "
                     "read the row's last error, fix the cause, then wake the goal "
                     "(`ledger wake`) or recover it",
    "CONTINUED_AGAINST_POLICY": "its host continued the session by itself against the "
                                "goal's resume policy (ask, quiet hours): look at what it "
                                "did, then recover it to clear this",
    OVERDUE_REASON: "its next expected evidence is overdue and nothing recorded why: is the "
                    "scheduler (manage.py qcluster) running? see `ledger doctor`",
}


@dataclass(frozen=True)
class Expectation:
    """What a goal waits for next, by when, and what happens if it does not come."""

    label: str
    evidence: str = ""  # one of the evidence codes ("" for an ended goal)
    deadline: datetime | None = None  # None: nothing is due (ended, or a human's turn)
    detail: str = ""

    def as_dict(self) -> dict[str, str | None]:
        return {"evidence": self.evidence or None,
                "deadline": iso(self.deadline) if self.deadline else None,
                "detail": self.detail}


# ---------------------------------------------------------------- needs a human


def attention(state: GoalState) -> str:
    """Why a human must look at this goal ("" when nobody must): the one truth
    behind /alerts, `ledger alerts`, `ledger doctor` and the dashboard. Stored
    as an indexed column, so it only reads the state (never the clock);
    ``alert`` adds the read-time OVERDUE."""
    if state.terminal:
        return state.reason if state.status == FAILED and \
            state.reason in FAILURES_FOR_A_HUMAN else ""
    if state.status == BLOCKED:
        return state.reason or "BLOCKED"
    if state.finish_requested:
        return PENDING_CLEANUP
    if state.alert_reason:
        return state.alert_reason
    if silent_jobs(state):
        return JOB_SILENT
    return ""


def alert(state: GoalState, now: datetime) -> str:
    """``attention``, or OVERDUE for a goal whose deadline passed unrecorded,
    or whose last event lies beyond the clock (``clocksteps.ahead_by``): its
    deadlines were counted from a clock that ran ahead, and only a command on
    it brings them back. The sweeper records that within a minute; with the
    scheduler down (seed 1, 7 days: a step during a three-day outage) the
    goal would hide behind deadlines hours away."""
    reason = attention(state)
    if reason:
        return reason
    if overdue(expectation(state).deadline, now) or clocksteps.ahead_by(state, now):
        return OVERDUE_REASON
    return ""


def overdue(deadline: datetime | None, now: datetime) -> bool:
    """The one rule for "overdue": a deadline passed more than SWEEP_SLACK ago
    (two sweeps) and nothing recorded why. The goal then needs a human."""
    return deadline is not None and deadline < overdue_cutoff(now)


def overdue_cutoff(now: datetime) -> datetime:
    """Deadlines before this instant are overdue (``overdue`` as a query's bound:
    the indexed ``deadline_at`` column)."""
    return now - SWEEP_SLACK


def why(reason: str) -> str:
    return WHY.get(reason, reason)


# ---------------------------------------------------------------- expectations


def label(state: GoalState, now: datetime) -> str:
    """The API's ``liveness``: what the goal is doing now, judged by the clock.
    A lease past its expiry is ``expired`` until the sweeper records it, never
    ``working``; a goal with an alert and no lease ``needs_human``."""
    expected = expectation(state)
    if state.lease is not None and not state.terminal:
        return EXPIRED if now >= state.lease.expires_at else WORKING
    if expected.label == NEEDS_HUMAN or attention(state):
        return NEEDS_HUMAN
    if overdue(expected.deadline, now):
        return OVERDUE
    return expected.label


def deadline_at(state: GoalState) -> datetime | None:
    """The projected ``deadline_at`` column: when the sweeper must look next.
    Every command computes it, and only the deadline: the texts that say
    what is expected are not written (``explain=False``)."""
    return expectation(state, explain=False).deadline


def expectation(state: GoalState, *, explain: bool = True) -> Expectation:
    """The next expected evidence and its deadline (the earliest, when two are
    due); ``explain=False``: the same, with every ``detail`` left empty."""
    if state.terminal:
        return Expectation(TERMINAL, detail=f"the goal is {state.status}" if explain else "")
    if state.status == BLOCKED or state.finish_requested:
        return Expectation(NEEDS_HUMAN, OPERATOR, None,
                           why(attention(state)) if explain else "")
    # HOST_SILENT and JOB_SILENT need a human to look, but the goal goes on:
    # its lease still expires, its rows are still repaired.
    main = _main_expectation(state, explain)
    earliest = main
    for other in (_job_expectation(state, explain), progress_expectation(state, explain),
                  pause_expectation(state, explain)):
        if other is not None and (earliest.deadline is None or other.deadline < earliest.deadline):
            earliest = other
    if earliest is main:
        # The rarer branches (a wake, a host) still spell their text; dropped here.
        return main if explain or not main.detail else \
            Expectation(main.label, main.evidence, main.deadline)
    return Expectation(main.label, earliest.evidence, earliest.deadline, earliest.detail)


def progress_expectation(state: GoalState, explain: bool = True) -> Expectation | None:
    """The progress deadline: by when the next checkpoint is due (None when
    none is: the goal waits for a stated reset, a blocking job, a human, or
    stands listed already). Holding a lease, the clock runs from the later of
    the last progress and the lease's grant; without one, a whole watchdog
    interval (the next wake) comes first."""
    if (state.terminal or state.status in (BLOCKED, PAUSED) or state.finish_requested
            or state.liveness_alert is not None):
        return None
    if next_job_deadline(state) is not None and not progress.waited_on_jobs(state):
        # Waiting on a job: its own deadline (JOB_SILENT) bounds it. Once per
        # progress only: a second wait without a checkpoint runs the clock.
        return None
    bound = timedelta(minutes=state.setting("progress_minutes"))
    # The next slot may come one interval later, and fire half an interval
    # late (a host's lateness, the most any wake is allowed): then a chunk.
    every = timedelta(seconds=state.interval_seconds)
    last = progress_since(state)
    since = progress.clock_start(state, last, every + every / 2)
    unleased = since + every + every / 2 + bound
    if state.lease is not None:
        # A holder gets a chunk from its grant, but a grant is no progress:
        # never past the deadline the goal had without a lease, so releasing
        # and retaking the lease cannot keep a goal unlisted.
        grant = state.lease.acquired_at
        return Expectation(WORKING, CHECKPOINT, holding_deadline(since, grant, bound, unleased),
                           f"a checkpoint that changes what is recorded, from "
                           f"{state.lease.holder} (no progress since {iso(last)}"
                           f"{_went_through(state)}); else {NO_PROGRESS}"
                           if explain else "")
    return Expectation(SCHEDULED, CHECKPOINT, unleased,
                       f"a checkpoint that changes what is recorded (no progress since "
                       f"{iso(last)}{_went_through(state)}): the next wake resumes the goal "
                       f"and its agent records one; else {NO_PROGRESS}"
                       if explain else "")


def holding_deadline(since: datetime, grant: datetime, bound: timedelta,
                     unleased: datetime) -> datetime:
    """A holder's progress deadline: a chunk (``bound``) from its grant, or
    from the last progress if that came later, but never past the deadline
    the goal had without the lease (``unleased``)."""
    return min(max(since, grant) + bound, unleased)


def _went_through(state: GoalState) -> str:
    said = progress.told(state)
    return f"; since then {said}" if said else ""


def pause_expectation(state: GoalState, explain: bool = True) -> Expectation | None:
    """A pause to a reset further away than the server's ``long_pause_minutes``:
    listed LONG_PAUSE once it has lasted that long, so a person decides
    whether to wait (a weekly limit, "try again on Jan 3"). None for any
    other goal, and for one listed already."""
    if state.status != PAUSED or state.paused_until is None or state.paused_at is None \
            or state.liveness_alert is not None:
        return None
    listed_at = state.paused_at + timedelta(minutes=state.setting("long_pause_minutes"))
    if state.paused_until <= listed_at:
        return None  # the reset comes first: the reset wake is the evidence
    return Expectation(SCHEDULED, SCHEDULER_FIRE, listed_at,
                       f"the reset at {iso(state.paused_until)} is further away than this "
                       f"server lets a pause go untold; at {iso(listed_at)} it is listed "
                       f"{LONG_PAUSE} for a person to decide" if explain else "")


def progress_since(state: GoalState) -> datetime:
    return state.progress_since or state.checkpoint_time or state.created_at  # type: ignore[return-value]


def _main_expectation(state: GoalState, explain: bool = True) -> Expectation:
    if state.lease is not None:
        return Expectation(
            WORKING, HEARTBEAT, lease_stale_at(state),
            f"a heartbeat or checkpoint from {state.lease.holder} before its lease "
            f"expires at {iso(state.lease.expires_at)} (then the stale grace)"
            if explain else "")
    if state.ready is not None:
        return Expectation(READY, PULL, ready_deadline(state),
                           "its agent takes the lease (run_goal, lease or claim) to resume "
                           f"the due wake; else {READY_UNCLAIMED}")
    if state.scheduler_backend == "host":
        return host_expectation(state)
    if state.alert_reason == WAKE_NOT_FIRING:
        # Repaired MAX_REPAIRS times and never fired: said once, repaired no
        # more (each repair was an event); a human (a wake, a recover, an
        # operator's `doctor --fix`) must act.
        return Expectation(NEEDS_HUMAN, SCHEDULER_FIRE, None, why(WAKE_NOT_FIRING))
    due = timing.next_wake_at(state)
    if due is not None:
        # "The reset wake" only when the slot due is a paused goal's reset wake.
        reset = (state.status == PAUSED and state.reset_wake is not None
                 and state.reset_wake.due_at == due)
        what = "the reset wake" if reset else "the next wake"
        # A row repaired after its due time has the scheduler's lateness anew.
        repaired = [wake.repaired_at for wake in (state.watchdog, *timing.one_off_wakes(state))
                    if wake is not None and wake.repaired_at is not None]
        start = max([due, *repaired])
        return Expectation(SCHEDULED, SCHEDULER_FIRE, start + SCHEDULER_LATENESS,
                           f"the scheduler fires {what}, due {iso(due)}; else its schedule row "
                           "is checked and repaired")
    # An internal goal nothing will fire: the sweeper arms its watchdog.
    return Expectation(SCHEDULED, SCHEDULER_FIRE, _updated(state),
                       "nothing is scheduled: the sweeper arms the watchdog")


def ready_deadline(state: GoalState) -> datetime:
    """When a due wake nobody pulled makes the goal READY_UNCLAIMED: its own
    deadline, whatever else (a job's) comes earlier."""
    assert state.ready is not None, "a due wake waiting for its pull"
    return state.ready.first_at + timedelta(minutes=state.setting("ready_timeout_minutes"))


def host_expectation(state: GoalState) -> Expectation:
    """A host goal: only its host fires it. The server never creates a native
    task for it (the seeds forbid that fallback): it waits, then says so.
    HOST_SILENT's own deadline (``overdue``), never the goal's earliest: a
    passed progress deadline is NO_PROGRESS, whatever its host does."""
    watchdog, every = state.watchdog, timedelta(seconds=state.interval_seconds)
    lateness = every / 2
    status = state.watchdog_status
    if state.alert_reason == HOST_SILENT:
        # Said once; now the host (a claim, a receipt) or the agent (a new
        # watchdog) must be heard from. Nothing more is due until then.
        return Expectation(NEEDS_HUMAN, HOST_CLAIM, None, why(HOST_SILENT))
    if watchdog is not None and status == "live" and watchdog.next_due_at:
        due = watchdog.next_due_at
        slots = state.setting("host_silent_slots")
        return Expectation(SCHEDULED, HOST_CLAIM, due + (slots - 1) * every + lateness,
                           f"its host claims the slot due {iso(due)} (a fire "
                           "before it claims none); "
                           f"after {slots} missed slot(s), {HOST_SILENT}")
    # No host task is known to fire: never prepared, not confirmed by a
    # receipt, uncertain, failed or disabled. Its agent must reconcile it.
    since = ((watchdog.last_receipt_at or watchdog.first_due_at if watchdog is not None
              else None) or state.updated_at)
    what = f"its host watchdog is {status}" if status else "it has no host watchdog"
    return Expectation(SCHEDULED, HOST_CLAIM, since + lateness,  # type: ignore[operator]
                       f"{what}: a receipt or a claim from its host; else {HOST_SILENT}")


def _job_expectation(state: GoalState, explain: bool = True) -> Expectation | None:
    job = next_job_deadline(state)
    if job is None:
        return None
    ref, deadline = job
    return Expectation(WORKING, JOB_REPORT, deadline,
                       f"a report of the blocking job {ref}; else {JOB_SILENT}"
                       if explain else "")


def job_deadline(state: GoalState, job: dict) -> datetime:
    minutes = state.setting("job_deadline_minutes")
    return datetime.fromisoformat(job["tracked_at"]) + timedelta(minutes=minutes)


def next_job_deadline(state: GoalState) -> tuple[str, datetime] | None:
    pending = [(f"{job['kind']} {job['ref']}", job_deadline(state, job))
               for job in state.running_jobs() if not job.get("silent_at")]
    return min(pending, key=lambda item: item[1]) if pending else None


def silent_jobs(state: GoalState) -> list[dict]:
    return [job for job in state.running_jobs() if job.get("silent_at")]


def _updated(state: GoalState) -> datetime:
    return state.updated_at or state.created_at  # type: ignore[return-value]
