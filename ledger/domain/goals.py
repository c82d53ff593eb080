"""A goal's own record: its start (``goal.started``, whose plan is its first
checkpoint), the workspace it binds and releases, and its checkpoints
(``checkpoint.recorded``). What decides them is ``ledger.domain.decider``
(the checkpoint rule, one goal per workspace); how each folds is here.
"""

from dataclasses import dataclass
from datetime import datetime

from ledger.domain import progress
from ledger.domain.codec import Payload, event_kind
from ledger.domain.events import Changes, Json, Style
from ledger.domain.liveness import PROGRESS_ENDS
from ledger.domain.parts import active
from ledger.domain.state import WAITING, GoalState
from ledger.domain.text import clean, items, known


@event_kind("goal.started")
@dataclass(frozen=True, slots=True, kw_only=True)
class GoalStarted(Payload):
    STYLE = Style("goal")

    goal_id: str
    workspace: str
    goal_key: str
    objective: str
    done_criteria: list[str]
    agent: str
    policy: Json
    session: Json
    timeout_seconds: int | None
    estimated_duration_seconds: int | None
    checkpoint: Json  # the plan: the goal's first checkpoint

    def fold(self, state: GoalState, at: datetime) -> Changes:
        checkpoint = self.checkpoint
        return dict(
            goal_id=self.goal_id,
            workspace=self.workspace,
            goal_key=self.goal_key,
            objective=self.objective,
            done_criteria=list(self.done_criteria),
            agent=self.agent,
            policy=dict(self.policy),
            session=dict(self.session),
            timeout_seconds=self.timeout_seconds,
            estimated_duration_seconds=self.estimated_duration_seconds,
            status=WAITING,
            reason="",
            current_step=checkpoint["current_step"],
            progress_pct=checkpoint["progress_pct"],
            next_actions=list(checkpoint["next_actions"]),
            checkpoints=1,
            checkpointed_at=at,
            progress_since=at,
            created_at=at,
        )

    def line(self) -> str:
        plan = items((self.checkpoint or {}).get("next_actions", []))
        policy = self.policy or {}
        text = f"“{clean(known(self.objective), 80)}” by {clean(self.agent or '?')}"
        text += f" ({policy['scheduler']} scheduler)" if policy.get("scheduler") else ""
        return text + (f" → plan: {plan}" if plan else "")


@event_kind("workspace.bound")
@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceBound(Payload):
    STYLE = Style("workspace")

    workspace: str

    def fold(self, state: GoalState, at: datetime) -> Changes:
        return {"workspace_bound": True}

    def line(self) -> str:
        return clean(known(self.workspace), 80, keep_end=True)


@event_kind("workspace.released")
@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceReleased(Payload):
    STYLE = Style("workspace")

    workspace: str
    by_operator: bool
    reason: str

    def fold(self, state: GoalState, at: datetime) -> Changes:
        return {"workspace_bound": False}

    def line(self) -> str:
        by = "an operator" if self.by_operator else "the lease holder"
        why = f": {clean(known(self.reason), 80)}" if self.reason else ""
        return f"{clean(known(self.workspace), 60, keep_end=True)} released by {by}{why}"


@event_kind("checkpoint.recorded")
@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointRecorded(Payload):
    STYLE = Style("checkpoint")

    current_step: str
    progress_pct: int
    completed: list[str]
    next_actions: list[str]
    artifacts: list[Json]  # {path, sha256, bytes}
    errors: list[str]
    note: str
    generation: int

    def fold(self, state: GoalState, at: datetime) -> Changes:
        # A new list, but the artifacts' dicts are shared with the state before:
        # no state's dicts are ever changed in place (a changed artifact is a new
        # dict), and copying all of them on every checkpoint was a sixth of a
        # replayed event on a goal with many artifacts.
        artifacts = list(state.artifacts)
        if self.artifacts:
            index = {a["path"]: i for i, a in enumerate(artifacts)}
            for artifact in self.artifacts:
                if artifact["path"] in index:
                    artifacts[index[artifact["path"]]] = dict(artifact)
                else:
                    index[artifact["path"]] = len(artifacts)
                    artifacts.append(dict(artifact))
        changes = dict(
            current_step=self.current_step,
            progress_pct=self.progress_pct,
            last_completed=list(self.completed),
            next_actions=list(self.next_actions),
            artifacts=artifacts,
            errors=list(self.errors),
            checkpoints=state.checkpoints + 1,
            last_checkpoint_seq=state.version + 1,
            checkpointed_at=at,
            # A sign of life for the uncertain-attempt rule.
            lease=active(state.lease),
        )
        said = progress.advances(state, self)
        if said is None:
            # The same step, percent, next actions and artifacts again, or back to
            # what a recent progress checkpoint said: activity, not progress
            # (docs/liveness.md). The clock, the wake-loop bound's count and the
            # alerts that wait for progress stay; the repeat is counted.
            return {**changes, "since_progress": progress.counted(state, progress.CHECKPOINTS)}
        return dict(
            changes,
            # The wake-loop bound: retry_count counts wakes since the last progress.
            retry_count=0,
            progress_since=at,
            since_progress={},
            recent_progress=progress.remembered(state, said),
            # Progress answers the alerts that waited for it (NO_PROGRESS, and a
            # wake that was not firing: the goal moves, whatever fired it).
            liveness_alert=None if state.alert_reason in PROGRESS_ENDS
            else state.liveness_alert,
            # Progress ends a rate-limit streak.
            rate_limits=0,
        )

    def line(self) -> str:
        text = f"step “{clean(known(self.current_step), 60)}” ({known(self.progress_pct)} %)"
        nxt = items(self.next_actions, 2)
        text += f" → next: {nxt}" if nxt else ""
        text += f", {len(self.artifacts)} artifact(s)" if self.artifacts else ""
        text += f", {len(self.errors)} error(s)" if self.errors else ""
        return text + (f", note: {clean(known(self.note), 60)}" if self.note else "")
