"""The decider: every rule of the protocol, as two pure functions.

``decide(state, command, now)`` returns the events a command produces, or
raises a DomainError and produces nothing. ``evolve(state, event)`` folds one
event into the state: each kind says how (its payload's ``fold``,
``ledger.domain.kinds``). The store calls them inside one transaction; replay calls
``fold`` over a goal's whole history; property tests call them directly.
``decision`` is ``decide`` with the state its events fold to, which deciding
has computed anyway (the liveness settle looks at it): the store records that
state instead of folding the same events a second time.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from functools import reduce
from typing import Any

from ledger.domain import (
    claims,
    clocksteps,
    continuations,
    dispatches,
    finishing,
    goals,
    jobs,
    leases,
    overdue,
    policy,
    pulls,
    requested,
    runs,
    validation,
    watchdogs,
)
from ledger.domain.commands import (
    AcquireLease,
    CoreCommand,
    Finish,
    Heartbeat,
    RecordCheckpoint,
    ReleaseLease,
    ReleaseWorkspace,
    RunGoal,
    StartGoal,
)
from ledger.domain.errors import (
    ArtifactConflict,
    GoalNotStarted,
    GoalTerminal,
    InvalidCommand,
    ProgressRegressed,
    SessionBound,
    WorkspaceBound,
)
from ledger.domain.events import Event
from ledger.domain.goals import CheckpointRecorded, GoalStarted, WorkspaceReleased
from ledger.domain.leases import LeaseReleased, fence
from ledger.domain.state import GoalState

INITIAL_STEP = "plan"

# --------------------------------------------------------------------------- decide


@dataclass(frozen=True)
class Decision:
    events: list[Event]
    state: GoalState  # fold(events, the state decided on)
    # A claim's (or an operator wake's) verdict: its occurrence and outcome,
    # decided once, even when nothing is recorded (already_claimed).
    claim: "claims.Verdict | None" = None


def decide(state: GoalState, command: "Command", now: datetime) -> list[Event]:
    return decision(state, command, now).events


def decision(state: GoalState, command: "Command", now: datetime) -> Decision:
    if now.tzinfo is None:
        raise ValueError("decide needs an aware 'now'")
    if isinstance(command, StartGoal):
        return _settled(state, _start(state, command, now), now)
    stepped = clocksteps.stepped_back(state, now)
    if stepped:
        # Stamps from a clock that ran ahead come back to now before anything
        # is decided on them (ledger.domain.clocksteps); then the command.
        decided = decision(fold(stepped, state), command, now)
        return replace(decided, events=stepped + decided.events)
    if isinstance(command, RunGoal):
        return _run(state, command, now)
    if not state.started:
        raise GoalNotStarted("the goal has not been started")
    if state.terminal and not isinstance(command, _ALLOWED_WHEN_TERMINAL):
        raise GoalTerminal(f"the goal is {state.status}; it accepts no more work")
    verdict = None
    judge = _JUDGED.get(type(command))
    if judge is not None:
        verdict, events = judge(state, command, now)
    else:
        handler = _DECIDERS.get(type(command))
        if handler is None:
            raise TypeError(f"unknown command {type(command).__name__}")
        events = handler(state, command, now)
    settled = _settled(state, leases.renewing(state, command, events, now), now)
    return replace(settled, claim=verdict) if verdict is not None else settled


def _settled(state: GoalState, events: list[Event], now: datetime) -> Decision:
    """The command's events plus what keeps the goal alive (finishing.settle)."""
    if not events:
        return Decision(events, state)
    after = fold(events, state)
    more = finishing.settle(state, after, now)
    return Decision(events + more, fold(more, after)) if more else Decision(events, after)


def _start(state: GoalState, cmd: StartGoal, now: datetime) -> list[Event]:
    if state.terminal:
        raise GoalTerminal(f"the goal is {state.status}; start a new one")
    if state.started:
        # One goal per workspace and every binding hold within one agent: the shell looks up
        # the starting agent's goals only (workspace paths are host-local,
        # session keys the agent's own names). Handed another agent's goal
        # anyway, refuse rather than return it: it would give away its state.
        if cmd.agent != state.agent:
            raise WorkspaceBound("this workspace and goal key belong to another agent's goal",
                                 field="goal_key")
        return []  # one goal per workspace: starting an active goal again returns it unchanged
    # The binding facts name the agent's own goals (see above); the other
    # goal's id is still not told, as no refusal names a goal it did not ask for.
    session = policy.session(dict(cmd.session))
    # A goal that binds its session (a host whose sessions share one workspace)
    # neither holds the workspace nor waits for it: its session key is its binding.
    binds_workspace = not policy.binds_session(session)
    if binds_workspace and cmd.workspace_bound_by and cmd.workspace_bound_by != cmd.goal_id:
        raise WorkspaceBound(
            f"workspace {cmd.workspace!r} is bound to another of this agent's active goals; "
            "finish it or release its workspace first", field="workspace")
    if cmd.session_bound_by and cmd.session_bound_by != cmd.goal_id:
        raise SessionBound("the session key is already used by another of this agent's "
                           "active goals", field="session.session_key")
    plan = validation.text_list(list(cmd.next_actions), "next_actions")
    started = GoalStarted(
        goal_id=validation.text(cmd.goal_id, "goal_id", limit=64, required=True),
        workspace=validation.text(cmd.workspace, "workspace", limit=validation.MAX_WORKSPACE,
                                  required=True),
        goal_key=validation.text(cmd.goal_key, "goal_key", limit=validation.MAX_KEY,
                                 required=True),
        objective=validation.text(cmd.objective, "objective", limit=validation.MAX_OBJECTIVE,
                                  required=True),
        done_criteria=validation.text_list(list(cmd.done_criteria), "done_criteria"),
        agent=validation.text(cmd.agent, "agent", limit=validation.MAX_KEY),
        policy=policy.policy(dict(cmd.policy), cmd.dispatchers, cmd.cadence_unit_seconds,
                             cmd.caps),
        session=session,
        timeout_seconds=_optional_seconds(cmd.timeout_seconds, "timeout_seconds"),
        estimated_duration_seconds=_optional_seconds(cmd.estimated_duration_seconds,
                                                     "estimated_duration_seconds"),
        # The plan is the first checkpoint, so no resume ever starts without one.
        checkpoint={"current_step": INITIAL_STEP, "progress_pct": 0, "next_actions": plan},
    )
    if not binds_workspace:
        return [Event(started, now)]
    return [Event(started, now), Event(goals.WorkspaceBound(workspace=started.workspace), now)]


def _run(state: GoalState, cmd: RunGoal, now: datetime) -> Decision:
    events = _start(state, cmd.start, now)
    started = fold(events, state)
    if leases.lease_refusal(started, now) is not None:
        return _settled(state, events, now)  # returned without a lease; the shell says why
    return _settled(state, events + _acquire(started, AcquireLease(cmd.holder,
                                                                    cmd.token_sha256), now), now)


def _acquire(state: GoalState, cmd: AcquireLease, now: datetime) -> list[Event]:
    """Take the lease; on a goal with a due wake, this is the pull that resumes it."""
    if leases.lease_refusal(state, now) is None and pulls.due_for_pull(state, now):
        return pulls.pull_events(state, cmd.holder, cmd.token_sha256, now)
    return leases.acquire(state, cmd, now)


def _optional_seconds(value: int | None, field: str) -> int | None:
    return None if value is None else policy.whole(value, field, 1, 30 * 86_400)


# ------------------------------------------------------------ checkpoints (the checkpoint rule)


def _checkpoint(state: GoalState, cmd: RecordCheckpoint, now: datetime) -> list[Event]:
    lease = fence(state, cmd.proof)
    pct = validation.progress(cmd.progress_pct)
    texts = (cmd.note, cmd.current_step, *cmd.completed, *cmd.next_actions, *cmd.errors,
             *(a.path for a in cmd.artifacts))
    scan = validation.any_secret(texts)  # one pass; per field only when it finds something
    note = validation.text(cmd.note, "note", limit=validation.MAX_NOTE, scan=scan)
    if pct < state.progress_pct and not note.strip():
        raise ProgressRegressed(
            f"progress_pct {pct} is below the recorded {state.progress_pct}; "
            "say why in 'note' to record a step back",
            field="progress_pct",
        )
    if len(cmd.artifacts) > validation.MAX_ARTIFACTS:
        raise InvalidCommand(f"artifacts has more than {validation.MAX_ARTIFACTS} items.",
                             field="artifacts")
    artifacts = []
    seen: set[str] = set()
    for i, artifact in enumerate(cmd.artifacts):
        name = f"artifacts[{i}]"
        path = validation.text(artifact.path, f"{name}.path", limit=validation.MAX_PATH,
                               required=True, scan=scan)
        if path in seen:
            raise InvalidCommand(f"{name}.path {path!r} appears twice.", field=f"{name}.path")
        seen.add(path)
        digest = validation.sha256(artifact.sha256, f"{name}.sha256")
        size = validation.byte_count(artifact.bytes, f"{name}.bytes")
        recorded = state.artifact(path)
        # The checkpoint rule: no blind overwrite of an artifact recorded before.
        if (recorded is not None and recorded["sha256"] != digest
                and artifact.previous_sha256 != recorded["sha256"]):
            raise ArtifactConflict(
                f"{path!r} was recorded with sha256 {recorded['sha256']}; "
                "state it as previous_sha256 to overwrite it",
                field=f"{name}.previous_sha256",
            )
        artifacts.append({"path": path, "sha256": digest, "bytes": size})
    recorded = CheckpointRecorded(
        current_step=validation.text(cmd.current_step, "current_step",
                                     limit=validation.MAX_STEP, required=True, scan=scan),
        progress_pct=pct,
        completed=validation.text_list(list(cmd.completed), "completed", scan=scan),
        next_actions=validation.text_list(list(cmd.next_actions), "next_actions", scan=scan),
        artifacts=artifacts,
        errors=validation.text_list(list(cmd.errors), "errors", scan=scan),
        note=note,
        generation=lease.generation,
    )
    events = [Event(recorded, now)]
    if cmd.wake is not None and not cmd.release_lease:
        raise InvalidCommand("wake is asked for at a turn boundary: with release_lease",
                             field="wake")
    if cmd.release_lease:
        events.append(Event(LeaseReleased(generation=lease.generation), now))
        if cmd.wake is not None:
            events += requested.requested_wake_events(state, cmd.wake, now)
    return events


def _release(state: GoalState, cmd: ReleaseLease, now: datetime) -> list[Event]:
    events = leases.release(state, cmd, now)
    if cmd.wake is not None:
        events += requested.requested_wake_events(state, cmd.wake, now)
    return events


def _release_workspace(state: GoalState, cmd: ReleaseWorkspace, now: datetime) -> list[Event]:
    if not cmd.by_operator:
        fence(state, cmd.proof)
    if not state.workspace_bound:
        return []
    reason = validation.text(cmd.reason, "reason", limit=validation.MAX_NOTE)
    return [Event(WorkspaceReleased(workspace=state.workspace, by_operator=cmd.by_operator,
                                    reason=reason), now)]


# The catalogue: every command type and the function that decides it (StartGoal
# and RunGoal, which may meet a goal not started yet, are decided above).
_DECIDERS: dict[type, Callable[[GoalState, Any, datetime], list[Event]]] = {
    AcquireLease: _acquire,
    Heartbeat: leases.heartbeat,
    ReleaseLease: _release,
    RecordCheckpoint: _checkpoint,
    Finish: finishing.finish,
    ReleaseWorkspace: _release_workspace,
    watchdogs.PrepareWatchdog: watchdogs.prepare,
    watchdogs.CancelWatchdog: watchdogs.cancel,
    watchdogs.RecordReceipt: finishing.receipt,
    overdue.CheckLiveness: overdue.check,
    dispatches.RecordDispatch: dispatches.dispatched,
    runs.ReportRun: runs.report,
    runs.ReportSessionActivity: runs.session_activity,
    runs.RequestApproval: runs.request_approval,
    runs.ResolveApproval: continuations.approved,
    runs.Stop: lambda state, cmd, now: [*runs.stop(state, cmd, now),
                                        *finishing.cancel_on_stop(state, now)],
    runs.Recover: runs.recover,
    jobs.TrackJob: jobs.track_job,
    jobs.UpdateJob: jobs.update_job,
    jobs.NotifyJob: jobs.notify_job,
    continuations.HostContinued: continuations.host_events,
}

# The commands whose decision is a verdict besides its events: a wake's
# claim (or an operator's wake) is answered with its occurrence and outcome
# even when nothing is recorded (already_claimed).
_JUDGED: dict[type, Callable[[GoalState, Any, datetime],
                             "tuple[claims.Verdict, list[Event]]"]] = {
    claims.ClaimWake: claims.decided,
    claims.WakeNow: claims.decided,
}

# A terminal goal still answers a late wake, takes the cancellation receipt
# of a leftover watchdog and a dispatch's outcome, is recovered by an
# operator and checked for its leftover rows; nothing else.
_ALLOWED_WHEN_TERMINAL = (claims.ClaimWake, watchdogs.RecordReceipt, runs.Recover,
                          dispatches.RecordDispatch, overdue.CheckLiveness)

COMMANDS: tuple[type, ...] = (StartGoal, RunGoal, *_DECIDERS, *_JUDGED)
Command = (CoreCommand | watchdogs.PrepareWatchdog | watchdogs.CancelWatchdog
           | watchdogs.RecordReceipt | claims.ClaimWake | overdue.CheckLiveness
           | dispatches.RecordDispatch | claims.WakeNow
           | jobs.TrackJob | jobs.UpdateJob | jobs.NotifyJob | runs.ReportRun
           | runs.ReportSessionActivity
           | runs.RequestApproval | runs.ResolveApproval | runs.Stop | runs.Recover
           | continuations.HostContinued)

# --------------------------------------------------------------------------- evolve


def evolve(state: GoalState, event: Event) -> GoalState:
    """One event folded into the state: the fields its kind's ``fold`` says
    it changes, applied in one copy of the (frozen) state. A payload class
    without a fold raises: a projection that silently ignores part of the
    history is worse than a replay that stops and says why."""
    # The state keeps times as datetimes: the event's own is folded in as it
    # is (no ISO text formatted per event; to_stored writes it once).
    at = event.at
    payload = event.payload
    changes = payload.fold(state, at)
    if payload.lease_expires_at is not None:
        changes = leases.renewed_by(state, changes, payload.lease_expires_at, at)
    return state.but(**changes, updated_at=at, version=state.version + 1)


def fold(events: Iterable[Event], state: GoalState | None = None) -> GoalState:
    return reduce(evolve, events, state if state is not None else GoalState())
