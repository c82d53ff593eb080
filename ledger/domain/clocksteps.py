"""A clock stepped back: stamps written while the server's clock ran ahead.

A server whose clock runs hours ahead for a few minutes (a bad NTP answer, a
hand-set clock, a VM restored from a snapshot) and is then set back leaves
its goals stamped in the future: a lease granted then expires hours from now,
a progress clock started then restarts hours from now, and a goal whose
holder died in that window read ``working`` with a deadline hours away —
unlisted for as long as the clock had been ahead.

Decision (docs/decisions.md, "A clock stepped back"): **recompute, do not
refuse.** Nothing can be refused while the clock is ahead (every stamp then
agrees with it); what can be done is to notice afterwards and bring the
stamps back. So:

- Within ``CLOCK_SKEW`` the store records a command at the goal's last event
  (``recording_time``): several hosts' clocks differ a little, and a goal's
  history never runs backwards by such a difference.
- Beyond it, the clock was stepped back. The next command on the goal (any
  command: an agent's heartbeat, the sweeper's liveness check, the doctor's
  repair) is decided at the clock's own now, and first records
  ``clock.stepped_back``: every stamp that starts a clock (the lease's grant
  and last heartbeat, the progress clock, a ready wake's start, a job's
  tracking) is brought back to now, and the lease expires at most its own
  ``lease_seconds`` from now. No deadline derived from them is then further
  away than the policy allows from the moment the step was seen.
- A silence the sweeper judged while the clock ran ahead (HOST_SILENT,
  NO_PROGRESS, a silent job…, stamped after the real now) is withdrawn: its
  deadline had passed only on the wrong clock, and listing it sends a person
  to re-create a host task that fires on time. The next check judges it again
  at the real time.

The sweeper finds such goals by the indexed ``updated_at`` column (a last
event more than ``CLOCK_SKEW`` ahead), so the correction does not wait for a
deadline that lies hours away. Stamps that are meant to lie in the future (a
watchdog's next slot, a reset wake, ``paused_until``) are left: they were
chosen by a rule, not read off the clock, and their own repairs (the schedule
rows') hold.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ledger.domain.codec import Payload, event_kind
from ledger.domain.events import Changes, Event, Style, iso
from ledger.domain.state import BLOCKED, LONG_PAUSE, WAITING, GoalState
from ledger.domain.text import known, short

# How far behind a goal's last event the clock may read and still be one
# clock among several (hosts a little apart, as a web host two minutes behind
# a scheduler host): the store then records at the last event. Further
# behind, the clock was stepped back. The same five minutes the scheduler
# may be late (liveness.SCHEDULER_LATENESS).
CLOCK_SKEW = timedelta(minutes=5)


def ahead_by(state: GoalState, now: datetime) -> timedelta | None:
    """How far the goal's last event lies beyond ``now``, when that is more
    than ``CLOCK_SKEW`` (else None). Ended goals have no clock left to run."""
    if state.updated_at is None or state.terminal:
        return None
    gap = state.updated_at - now
    return gap if gap > CLOCK_SKEW else None


def recording_time(state: GoalState, now: datetime) -> datetime:
    """The instant a command on this goal is decided and recorded at: never
    before its last event by less than ``CLOCK_SKEW`` (clocks of several hosts
    a little apart), and the clock's own ``now`` when it is further behind
    (a clock stepped back: ``stepped_back`` corrects the stamps)."""
    last = state.updated_at
    if last is not None and now < last <= now + CLOCK_SKEW:
        return last
    return now


def stepped_back(state: GoalState, now: datetime) -> list[Event]:
    """``clock.stepped_back`` when the goal's stamps lie beyond the skew bound."""
    ahead = ahead_by(state, now)
    if ahead is None:
        return []
    return [Event(ClockSteppedBack(last_recorded=iso(state.updated_at),  # type: ignore[arg-type]
                                   ahead_seconds=int(ahead.total_seconds())), now)]


def _back(value: Any, at: datetime) -> Any:
    """A stamp that starts a clock, brought back to ``at`` if it lies beyond it."""
    if value is not None and value > at:
        return at
    return value


def _back_text(value: Any, at: datetime) -> Any:
    """The same for a stamp kept as ISO text (in ``since_progress``, in a job)."""
    if isinstance(value, str) and value and datetime.fromisoformat(value) > at:
        return iso(at)
    return value


# The goal's own fields that start a clock (a deadline is counted from them).
# A new such field belongs here, or a clock step leaves its deadline ahead.
CLOCK_STARTS = ("progress_since", "checkpointed_at", "paused_at")
# The same inside ``since_progress`` (ledger.domain.progress): the first job
# wait's end and the first wake since the last progress.
PROGRESS_STARTS = ("waited_at", "woken_at")


# liveness.READY_UNCLAIMED (ledger.domain.liveness imports this module).
READY_UNCLAIMED = "READY_UNCLAIMED"

JUDGED_SILENCES = frozenset({"HOST_SILENT", "NO_PROGRESS", "WAKE_NOT_FIRING", LONG_PAUSE})


def _ahead(value: str | None, now: datetime) -> bool:
    return bool(value) and datetime.fromisoformat(value) > now  # type: ignore[arg-type]


def _job_back(job: dict[str, Any], at: datetime) -> dict[str, Any]:
    """A job's tracking stamp brought back; its silence, judged ahead, withdrawn."""
    moved = {**job}
    if moved.get("tracked_at"):
        moved["tracked_at"] = _back_text(moved["tracked_at"], at)
    if _ahead(moved.get("silent_at"), at):
        del moved["silent_at"]
    return moved


def _unblocked(state: GoalState, at: datetime) -> Changes:
    """A READY_UNCLAIMED block judged while the clock ran ahead (stamped after
    the real now), withdrawn: its deadline had passed only on the wrong clock.
    The goal is back where it was, waiting (a ready goal holds no lease) with
    its due wake ready for the pull since now, so the next check judges its
    READY_UNCLAIMED deadline again at the real time. The block's summary goes
    with it; a block judged on the real clock stays."""
    kept = state.unclaimed
    if (state.status != BLOCKED or state.reason != READY_UNCLAIMED or kept is None
            or kept.at <= at):
        return {}
    return {"status": WAITING, "reason": "", "summary": "", "unclaimed": None,
            "ready": kept.but(at=at, since=at)}


@event_kind("clock.stepped_back")
@dataclass(frozen=True, slots=True, kw_only=True)
class ClockSteppedBack(Payload):
    """The clock read ``ahead_seconds`` behind the goal's last event
    (``last_recorded``): its stamps from the future are now."""

    STYLE = Style("clock")

    last_recorded: str
    ahead_seconds: int

    def fold(self, state: GoalState, at: datetime) -> Changes:
        """The fields whose stamps it brings back."""
        changes: Changes = {}
        lease = state.lease
        if lease is not None:
            longest = at + timedelta(seconds=lease.lease_seconds or 0)
            changes["lease"] = lease.but(
                acquired_at=_back(lease.acquired_at, at),
                last_heartbeat_at=_back(lease.last_heartbeat_at, at),
                expires_at=min(lease.expires_at, longest))
        for name in CLOCK_STARTS:
            moved = _back(getattr(state, name), at)
            if moved != getattr(state, name):
                changes[name] = moved
        since = {name: _back_text(value, at) if name in PROGRESS_STARTS else value
                 for name, value in state.since_progress.items()}
        if since != state.since_progress:
            changes["since_progress"] = since
        if state.ready is not None:
            changes["ready"] = state.ready.but(at=_back(state.ready.at, at),
                                               since=_back(state.ready.since, at))
        if any(_back_text(job.get("tracked_at"), at) != job.get("tracked_at")
               or _ahead(job.get("silent_at"), at) for job in state.jobs):
            changes["jobs"] = [_job_back(job, at) for job in state.jobs]
        alert = state.liveness_alert
        if alert is not None and alert.at > at and alert.reason in JUDGED_SILENCES:
            changes["liveness_alert"] = None
        changes.update(_unblocked(state, at))
        return changes


    # The alerts a deadline raises, so a clock that ran ahead may have raised them
    # early. A fact (a host continued against the goal's policy) stays, whenever
    # it was recorded.

    def line(self) -> str:
        return (f"the clock read {known(self.ahead_seconds)} s behind the last event "
                f"({short(self.last_recorded)}): its stamps from the future brought back")
