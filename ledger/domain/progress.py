"""What counts as progress, defined once (docs/liveness.md, "What counts as progress").

Progress is evidence an agent cannot produce by repeating itself:

- a checkpoint that changes what is recorded: the step, the percent, the
  next actions, or an artifact's checksum (``advances``), to something none
  of the last ``RECENT`` progress checkpoints recorded (an agent that
  alternates two steps, A, B, A, B, is looping);
- or a verified finish (the goal completes: it is then terminal).

Activity is not progress. Heartbeats, lease grants, a checkpoint that
records what was recorded already, and a blocking job's end without a new
checkpoint leave the progress clock (``GoalState.progress_since``) where it
was; an agent that releases and retakes its lease every minute, or says the
same step at every wake, is listed NO_PROGRESS like one that says nothing.
What such a goal went through since its last progress is counted
(``GoalState.since_progress``) and told with the listing: lease grants,
empty turns (leases that ended without progress), checkpoints that changed
nothing and job ends. Its wakes stop after ``max_wake_retries`` empty turns
(``claims``): a wake that would resume an empty loop burns quota on nothing.

Waits its agent did not choose are not a lack of progress and start the
clock afresh without resetting the counts: the end of a rate-limit pause
(the provider's reset), the lateness of the first wake since the last
progress (a silent host, the scheduler down: ``clock_start``), and the end of the
first wait on blocking jobs since the last progress (a CI run of hours is
bounded by the job's own deadline). Each is credited once per progress: a
second grant or job wait without a checkpoint between them is not, and a
later grant never moves the deadline past the one the goal had without a
lease (``liveness.holding_deadline``). Otherwise a holder that retakes its
lease every minute, or tracks a job and reports it done every hour, hides
forever. A human's recovery or
approval is a fresh start: it restarts the clock and the counts.
"""

import hashlib
from datetime import datetime, timedelta
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any

from ledger.domain.events import iso
from ledger.domain.state import GoalState

if TYPE_CHECKING:  # annotations only: the checkpoint's fold reads this module
    from ledger.domain.goals import CheckpointRecorded

# The counts kept since the last progress (``GoalState.since_progress``).
LEASES = "leases"  # lease grants (by the agent, a pull, a wake, a takeover)
EMPTY_TURNS = "empty_turns"  # leases that ended without progress
CHECKPOINTS = "checkpoints"  # checkpoints that changed nothing
JOBS = "jobs"  # blocking jobs that ended
# When the first job wait since the last progress ended (its one fresh start),
# and when the first wake since then came that granted a lease.
WAITED = "waited_at"
WOKEN = "woken_at"
COUNTS = (EMPTY_TURNS, CHECKPOINTS, LEASES, JOBS)


# How many of the latest progress checkpoints a new one is compared with. A
# loop through more distinct states than this is not caught, but it is a
# loop an agent must take pains to build; eight covers the retry loops seen
# (two or three steps said in turn).
RECENT = 8


def advances(state: GoalState, data: "CheckpointRecorded") -> str | None:
    """The fingerprint of a checkpoint that is progress, None for one that is
    not. Progress changes what is recorded (its step, percent or next
    actions, or the checksum of an artifact: a new one, or a new version) to
    something none of the latest progress checkpoints said. The completed
    items, errors and note are narration: an agent could vary them forever
    without moving. Answered with the fingerprint, which the fold then
    remembers: computing it is most of what judging a checkpoint costs, and
    replay judges every checkpoint ever recorded."""
    if not _changes(state, data):
        return None
    said = fingerprint(data)
    return None if said in state.recent_progress else said


def _changes(state: GoalState, data: "CheckpointRecorded") -> bool:
    if data.current_step != state.current_step or data.progress_pct != state.progress_pct:
        return True
    if list(data.next_actions) != list(state.next_actions):
        return True
    for artifact in data.artifacts:
        recorded = state.artifact(artifact["path"])
        if recorded is None or recorded["sha256"] != artifact["sha256"]:
            return True
    return False


def fingerprint(data: "CheckpointRecorded") -> str:
    """What a checkpoint says that counts as progress (not its narration), as
    a short digest of its JSON: the step, percent, next actions and its
    artifacts' checksums."""
    given = data.artifacts
    if not given:
        artifacts = ""
    elif len(given) == 1:  # most checkpoints that name any: nothing to sort
        artifacts = f"[{_quoted(given[0]['path'])},{_quoted(given[0]['sha256'])}]"
    else:
        artifacts = ",".join(f"[{_quoted(path)},{_quoted(digest)}]"
                             for path, digest in sorted((a["path"], a["sha256"])
                                                        for a in given))
    said = (f"[{_quoted(data.current_step)},{data.progress_pct},"
            f"[{','.join(map(_quoted, data.next_actions))}],[{artifacts}]]")
    return hashlib.sha256(said.encode()).hexdigest()[:16]


# The digest's text is stored (in ``recent_progress``), so it never changes:
# json.dumps([step, pct, next_actions, [[path, sha256], ...]],
# separators=(",", ":"), ensure_ascii=False), written out with the standard
# library's string quoting (as the hash chain does, ledger.eventstore.chain).
# json.dumps builds an encoder per call, most of what judging a checkpoint
# cost, and replay judges every checkpoint ever recorded.
# tests/domain/test_progress_evidence.py holds the two texts equal.
_quoted = encode_basestring


def remembered(state: GoalState, said: str) -> list[str]:
    """``recent_progress`` with a progress checkpoint's fingerprint last."""
    return [*state.recent_progress[-(RECENT - 1):], said]


def counted(state: GoalState, name: str, by: int = 1) -> dict[str, Any]:
    """``since_progress`` with one count raised."""
    return {**state.since_progress, name: state.since_progress.get(name, 0) + by}


def lease_granted(state: GoalState, at: datetime, via: str) -> dict[str, Any]:
    """Changes when a lease is granted: one more grant counted, and an empty
    turn if a lease granted since the last progress ends with it (a
    takeover). The first wake since the last progress that grants a lease
    (``via`` a wake's claim or the pull of a due wake) starts the clock
    afresh: the wait for it was not its agent's to choose (a late slot, a
    silent host, the scheduler down). The agent's own lease calls, and later
    wakes, do not."""
    counts = state.since_progress
    if state.lease is not None and counts.get(LEASES):
        counts = counted(state, EMPTY_TURNS)
    counts = {**counts, LEASES: counts.get(LEASES, 0) + 1}
    if via not in ("wake", "pull") or counts.get(WOKEN):
        return {"since_progress": counts}
    # When the wake came: a pull takes a wake that was due since it became
    # ready (how long its agent took to pull it was the agent's choice).
    woke = state.ready.first_at if via == "pull" and state.ready is not None else at
    return {"since_progress": {**counts, WOKEN: iso(woke)}}


def clock_start(state: GoalState, since: datetime, wait: timedelta) -> datetime:
    """Since when the progress deadline counts: the last progress, or, when
    the first wake since then came later than ``wait`` (the most a goal
    without a lease waits for its next wake) after it, that much before the
    wake — the lateness was not its agent's (a silent host, the scheduler
    down), so the wake's turn gets its whole chunk."""
    woken = state.since_progress.get(WOKEN)
    return max(since, datetime.fromisoformat(woken) - wait) if woken else since


def lease_ended(state: GoalState) -> dict[str, Any]:
    """The counts after a lease ends: an empty turn when it was granted since
    the last progress (any grant since then is this lease: one at a time)."""
    if state.lease is not None and state.since_progress.get(LEASES):
        return counted(state, EMPTY_TURNS)
    return state.since_progress


def job_ended(state: GoalState, at: datetime) -> dict[str, Any]:
    """Changes when a blocking job ends: counted; the clock starts afresh
    only at the end of the first job wait since the last progress (no job
    left running), never at a later one."""
    counts = counted(state, JOBS)
    still_running = len(state.running_jobs()) > 1
    if still_running or state.since_progress.get(WAITED):
        return {"since_progress": counts}
    return {"since_progress": {**counts, WAITED: iso(at)}, "progress_since": at}


def waited_on_jobs(state: GoalState) -> bool:
    """A job wait since the last progress was credited already: the progress
    clock runs while further jobs run."""
    return bool(state.since_progress.get(WAITED))


def empty_turns(state: GoalState) -> int:
    return int(state.since_progress.get(EMPTY_TURNS, 0))


def told(state: GoalState) -> str:
    """The counts as a listing says them ("" when there are none)."""
    counts = state.since_progress
    words = {EMPTY_TURNS: "empty turn", CHECKPOINTS: "checkpoint that changed nothing",
             LEASES: "lease grant", JOBS: "job end"}
    parts = []
    for name in COUNTS:
        n = int(counts.get(name, 0))
        if n:
            word = words[name]
            plural = word.replace("checkpoint ", "checkpoints ") if n > 1 and \
                name == CHECKPOINTS else word + ("s" if n > 1 else "")
            parts.append(f"{n} {plural}")
    return ", ".join(parts)


def summary(state: GoalState) -> dict[str, int]:
    """The counts a NO_PROGRESS listing records (each of COUNTS, zeros too)."""
    return {name: int(state.since_progress.get(name, 0)) for name in COUNTS}
