"""The decider's rules, called directly: no database, no Django."""

import ast
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ledger.domain import (
    Artifact,
    Finish,
    GoalState,
    RecordCheckpoint,
    StartGoal,
    decide,
    evolve,
    fold,
)
from ledger.domain.errors import (
    ArtifactConflict,
    GoalNotStarted,
    GoalTerminal,
    InvalidCommand,
    ProgressRegressed,
)
from ledger.domain.state import CHECKPOINT_CONTRACT_FIELDS

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
SHA_A, SHA_B = "a" * 64, "b" * 64


def apply(state: GoalState, command, at: datetime = T0) -> GoalState:
    return fold(decide(state, command, at), state)


def started(**overrides) -> GoalState:
    command = StartGoal(goal_id="g-1", workspace="/srv/repo", goal_key="issue-7",
                        objective="Fix the flaky test", done_criteria=("CI green",),
                        next_actions=("reproduce", "fix"), agent="agent-1")
    return apply(GoalState(), command.__class__(**{**_fields(command), **overrides}))


def _fields(command) -> dict:
    return {name: getattr(command, name) for name in command.__slots__}


def test_domain_package_imports_nothing_from_django():
    for path in Path("ledger/domain").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for name in names:
                assert not name.startswith(("django", "rest_framework", "django_q")), \
                    f"{path} imports {name}"


def test_start_records_the_plan_as_the_first_checkpoint():
    state = started()
    assert state.status == "waiting"
    assert state.current_step == "plan"
    assert state.next_actions == ["reproduce", "fix"]
    assert state.checkpoints == 1
    assert state.version == 1
    assert state.created_at == state.updated_at == "2026-12-02T09:00:00.000000Z"


def test_starting_an_active_goal_again_returns_no_events():
    state = started()
    again = StartGoal(goal_id="g-2", workspace="/srv/repo", goal_key="issue-7", objective="x")
    assert decide(state, again, T0) == []


def test_start_rejects_missing_objective_and_credentials():
    with pytest.raises(InvalidCommand) as missing:
        started(objective="  ")
    assert missing.value.field == "objective"
    with pytest.raises(InvalidCommand) as secret:
        started(objective="deploy with key sk-proj-abcdefghijklmnopqrstuvwxyz123456")
    assert secret.value.field == "objective"
    assert "credential" in secret.value.detail


def test_checkpoint_contract_has_exactly_the_seed_fields():
    state = apply(started(), RecordCheckpoint(current_step="tests", progress_pct=40,
                                              completed=("wrote test",), next_actions=("fix",)))
    contract = state.checkpoint_contract()
    assert tuple(contract) == CHECKPOINT_CONTRACT_FIELDS
    assert contract["task_id"] == "g-1"
    assert contract["goal"] == "Fix the flaky test"
    assert contract["progress_pct"] == 40
    assert contract["last_completed"] == ["wrote test"]


@pytest.mark.parametrize("pct", [-1, 101, 50.5, "50", True, None])
def test_checkpoint_rejects_progress_outside_0_to_100(pct):
    with pytest.raises(InvalidCommand) as error:
        decide(started(), RecordCheckpoint(current_step="x", progress_pct=pct), T0)
    assert error.value.field == "progress_pct"


def test_progress_may_only_go_back_with_a_reason():
    state = apply(started(), RecordCheckpoint(current_step="half", progress_pct=50))
    with pytest.raises(ProgressRegressed):
        decide(state, RecordCheckpoint(current_step="redo", progress_pct=30), T0)
    back = apply(state, RecordCheckpoint(current_step="redo", progress_pct=30,
                                         note="the migration was wrong; redoing it"))
    assert back.progress_pct == 30


def test_an_artifact_is_overwritten_only_with_its_previous_checksum():
    state = apply(started(), RecordCheckpoint(
        current_step="build", progress_pct=10, artifacts=(Artifact("dist/app.whl", SHA_A, 10),)))
    blind = RecordCheckpoint(current_step="rebuild", progress_pct=20,
                             artifacts=(Artifact("dist/app.whl", SHA_B, 12),))
    with pytest.raises(ArtifactConflict):
        decide(state, blind, T0)
    wrong = RecordCheckpoint(current_step="rebuild", progress_pct=20,
                             artifacts=(Artifact("dist/app.whl", SHA_B, 12, SHA_B),))
    with pytest.raises(ArtifactConflict):
        decide(state, wrong, T0)
    stated = RecordCheckpoint(current_step="rebuild", progress_pct=20,
                              artifacts=(Artifact("dist/app.whl", SHA_B, 12, SHA_A),))
    after = apply(state, stated)
    assert after.artifacts == [{"path": "dist/app.whl", "sha256": SHA_B, "bytes": 12}]
    same = RecordCheckpoint(current_step="again", progress_pct=20,
                            artifacts=(Artifact("dist/app.whl", SHA_B, 12),))
    assert decide(after, same, T0)  # the same checksum again is no overwrite


@pytest.mark.parametrize("artifact, field", [
    (Artifact("", SHA_A, 1), "artifacts[0].path"),
    (Artifact("a", "A" * 64, 1), "artifacts[0].sha256"),
    (Artifact("a", "abc", 1), "artifacts[0].sha256"),
    (Artifact("a", SHA_A, -1), "artifacts[0].bytes"),
])
def test_artifact_shape_is_checked(artifact, field):
    with pytest.raises(InvalidCommand) as error:
        decide(started(), RecordCheckpoint(current_step="x", progress_pct=1,
                                           artifacts=(artifact,)), T0)
    assert error.value.field == field


def test_oversized_lists_and_text_are_refused():
    with pytest.raises(InvalidCommand):
        decide(started(), RecordCheckpoint(current_step="x", progress_pct=1,
                                           next_actions=tuple(["a"] * 101)), T0)
    with pytest.raises(InvalidCommand):
        decide(started(), RecordCheckpoint(current_step="x" * 501, progress_pct=1), T0)


@pytest.mark.parametrize("status, expected, reason", [
    ("completed", "done", ""),
    ("failed", "failed", ""),
    ("blocked", "blocked", "AGENT_BLOCKED"),
])
def test_finish(status, expected, reason):
    state = apply(started(), Finish(status=status, summary="ok"))
    assert (state.status, state.reason, state.summary) == (expected, reason, "ok")


def test_finish_rejects_unknown_status():
    with pytest.raises(InvalidCommand):
        decide(started(), Finish(status="paused"), T0)


@pytest.mark.parametrize("finish", ["completed", "failed"])
def test_a_terminal_goal_refuses_work(finish):
    state = apply(started(), Finish(status=finish))
    for command in (RecordCheckpoint(current_step="x", progress_pct=1), Finish("completed"),
                    StartGoal(goal_id="g", workspace="w", goal_key="k", objective="o")):
        with pytest.raises(GoalTerminal):
            decide(state, command, T0)


def test_commands_before_start_are_refused():
    with pytest.raises(GoalNotStarted):
        decide(GoalState(), RecordCheckpoint(current_step="x", progress_pct=1), T0)


def test_a_checkpoint_resets_the_wake_retry_count():
    state = started().but(retry_count=3)
    assert apply(state, RecordCheckpoint(current_step="x", progress_pct=1)).retry_count == 0


def test_evolve_refuses_unknown_kinds_and_naive_times():
    from ledger.domain import Event

    with pytest.raises(ValueError, match="no evolver"):
        evolve(started(), Event("mystery.happened", {}, T0))
    with pytest.raises(ValueError):
        decide(started(), Finish("completed"), T0.replace(tzinfo=None))


def test_updated_at_follows_the_event_time():
    later = T0 + timedelta(minutes=5, microseconds=7)
    state = apply(started(), RecordCheckpoint(current_step="x", progress_pct=1), later)
    assert state.updated_at == "2026-12-02T09:05:00.000007Z"
