"""The decider's rules, called directly: no database, no Django."""

import ast
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ledger.domain import (
    AcquireLease,
    Artifact,
    Event,
    Finish,
    GoalState,
    Heartbeat,
    LeaseProof,
    RecordCheckpoint,
    ReleaseLease,
    ReleaseWorkspace,
    RunGoal,
    StartGoal,
    decide,
    evolve,
    fold,
    iso,
    lease_refusal,
)
from ledger.domain.commands import Evidence
from ledger.domain.errors import (
    ArtifactConflict,
    GoalBlocked,
    GoalNotStarted,
    GoalTerminal,
    InvalidCommand,
    LeaseHeld,
    LeaseLost,
    LeaseRequired,
    ProgressRegressed,
    SessionBound,
    WorkspaceBound,
)
from ledger.domain.smartwake import preflight, resume_packet
from ledger.domain.validation import canonical_workspace
from tests.factories import completed, evidence_for, proof_of

# The seed checkpoint contract, field for field (served at /goals/{id}/checkpoint).
CHECKPOINT_CONTRACT_FIELDS = (
    "task_id",
    "goal",
    "status",
    "current_step",
    "progress_pct",
    "last_completed",
    "next_actions",
    "artifacts",
    "errors",
    "retry_count",
    "updated_at",
)

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
SHA_A, SHA_B, TOKEN_1, TOKEN_2 = "a" * 64, "b" * 64, "1" * 64, "2" * 64


def apply(state: GoalState, command, at: datetime = T0) -> GoalState:
    return fold(decide(state, command, at), state)


def start_command(**overrides) -> StartGoal:
    values = {"goal_id": "g-1", "workspace": "/srv/repo", "goal_key": "issue-7",
              "objective": "Fix the flaky test", "done_criteria": ("CI green",),
              "next_actions": ("reproduce", "fix"), "agent": "agent-1"}
    return StartGoal(**{**values, **overrides})


def started(leased: bool = True, **overrides) -> GoalState:
    """A started goal, by default with agent-1 holding a lease (TOKEN_1)."""
    command = start_command(**overrides)
    if leased:
        return apply(GoalState(), RunGoal(command, "agent-1", TOKEN_1))
    return apply(GoalState(), command)


def checkpoint(state: GoalState, **values) -> RecordCheckpoint:
    return RecordCheckpoint(**{"current_step": "step", "progress_pct": state.progress_pct,
                               **values, "proof": proof_of(state)})


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


# ------------------------------------------------------------------ starting


def test_start_records_the_plan_as_the_first_checkpoint_and_binds_the_workspace():
    state = started(leased=False)
    assert state.status == "waiting"
    assert state.current_step == "plan"
    assert state.next_actions == ["reproduce", "fix"]
    assert state.checkpoints == 1
    assert state.workspace_bound
    # goal.started, workspace.bound, and (no lease: liveness) its watchdog
    assert state.version == 4
    assert state.watchdog.status == "live"
    assert state.policy == {"lease_seconds": 600, "cadence_minutes": 60, "max_continuations": 3,
                            "max_wake_retries": 5, "scheduler": "internal", "dispatch": "none",
                            "stale_grace_seconds": 60, "host_silent_slots": 2,
                            "ready_timeout_minutes": 120, "job_deadline_minutes": 360,
                            "progress_minutes": 60, "long_pause_minutes": 1440,
                            "interval_seconds": 3600}
    assert iso(state.created_at) == iso(state.updated_at) == "2026-12-02T09:00:00.000000Z"


def test_run_goal_starts_and_takes_the_first_lease():
    state = started()
    assert state.status == "running"
    assert state.lease.holder == "agent-1"
    assert state.lease.generation == 1 == state.lease_generation
    assert state.lease.token_sha256 == TOKEN_1
    assert iso(state.lease.expires_at) == "2026-12-02T09:10:00.000000Z"


def test_starting_an_active_goal_again_returns_no_events():
    state = started()
    again = StartGoal(goal_id="g-2", workspace="/srv/repo", goal_key="issue-7", objective="x",
                      agent="agent-1")
    assert decide(state, again, T0) == []
    # RunGoal on the same goal while the lease is live: no new lease either.
    assert decide(state, RunGoal(again, "agent-1", TOKEN_2), T0) == []


def test_a_start_is_never_handed_another_agents_goal():
    """Bindings are per agent, so the store never hands a start another agent's
    goal; if a shell did, the domain refuses instead of returning its state."""
    state = started()
    for stranger in ("agent-2", ""):
        again = StartGoal(goal_id="g-2", workspace="/srv/repo", goal_key="issue-7",
                          objective="x", agent=stranger)
        with pytest.raises(WorkspaceBound) as refused:
            decide(state, RunGoal(again, stranger or "x", TOKEN_2), T0)
        assert "g-1" not in refused.value.detail


def test_start_rejects_missing_objective_and_credentials():
    with pytest.raises(InvalidCommand) as missing:
        started(objective="  ")
    assert missing.value.field == "objective"
    with pytest.raises(InvalidCommand) as secret:
        started(objective="deploy with key sk-proj-abcdefghijklmnopqrstuvwxyz123456")
    assert secret.value.field == "objective"
    assert "credential" in secret.value.detail


def test_texts_the_database_could_not_store_are_refused_by_the_domain_itself():
    """Whatever shell sends them: a NUL, or a lone surrogate (what JSON's
    "\\ud800" escape decodes to), which no UTF-8 column holds."""
    state = started()
    for bad in ("a\x00b", "half \ud800 a pair", "\udfff"):
        with pytest.raises(InvalidCommand) as refused:
            decide(state, checkpoint(state, note=bad), T0)
        assert refused.value.field == "note"
    # Non-ASCII text as such is fine: a full pair, accents, CJK.
    decide(state, checkpoint(state, note="caf\u00e9 \U0001f600 \u4e2d\u6587"), T0)


def test_a_bound_workspace_or_session_refuses_another_goal():
    with pytest.raises(WorkspaceBound) as bound:
        started(workspace_bound_by="other-goal")
    assert "other-goal" not in bound.value.detail  # it may be another agent's goal
    with pytest.raises(SessionBound):
        started(session={"session_key": "s-1"}, session_bound_by="other-goal")
    # The goal's own binding is no conflict.
    assert started(workspace_bound_by="g-1").status == "running"


def test_a_goal_that_binds_its_session_leaves_the_shared_workspace_free():
    """A host whose sessions share one workspace (an OpenClaw agent): each
    session is its own goal, held by its session key, not by the folder."""
    session = {"session_key": "agent:main:wl-2", "binds": "session"}
    state = started(session=session, workspace_bound_by="other-goal")
    assert state.status == "running" and state.workspace_bound is False
    with pytest.raises(SessionBound):
        started(session=session, session_bound_by="other-goal")
    with pytest.raises(InvalidCommand) as keyless:
        started(session={"binds": "session"})
    assert keyless.value.field == "session.session_key"
    with pytest.raises(InvalidCommand) as unknown:
        started(session={"session_key": "s", "binds": "folder"})
    assert unknown.value.field == "session.binds"


@pytest.mark.parametrize("policy, field", [
    ({"lease_seconds": 4}, "policy.lease_seconds"),
    ({"lease_seconds": "600"}, "policy.lease_seconds"),
    ({"max_continuations": -1}, "policy.max_continuations"),
    ({"scheduler": "cron"}, "policy.scheduler"),
    ({"colour": "blue"}, "policy.colour"),
])
def test_policy_is_checked(policy, field):
    with pytest.raises(InvalidCommand) as error:
        started(policy=policy)
    assert error.value.field == field


def test_session_timezone_must_be_iana():
    assert started(session={"timezone": "Europe/Istanbul"}).session["timezone"] == \
        "Europe/Istanbul"
    with pytest.raises(InvalidCommand) as error:
        started(session={"timezone": "Mars/Olympus"})
    assert error.value.field == "session.timezone"


@pytest.mark.parametrize("raw, canonical", [
    ("/srv/repo/", "/srv/repo"),
    ("/srv//repo/./x/..", "/srv/repo"),
    ("  /srv/repo  ", "/srv/repo"),
    ("//srv/repo", "/srv/repo"),
    ("github.com/acme/app/", "github.com/acme/app"),
])
def test_canonical_workspace(raw, canonical):
    assert canonical_workspace(raw) == canonical


# ------------------------------------------------------------------ leases


def test_a_live_lease_is_never_stolen():
    state = started()
    for at in (T0 + timedelta(minutes=1), T0 + timedelta(minutes=9, seconds=59)):
        with pytest.raises(LeaseHeld) as held:
            decide(state, AcquireLease("agent-1", TOKEN_2), at)
        assert held.value.extra["next_required_action"] == "wait_for_holder"
    assert held.value.extra["retry_after_seconds"] == 61  # 1 s to expiry + 60 s grace


def test_past_expiry_only_the_grace_remains_then_takeover():
    state = started()
    in_grace = T0 + timedelta(minutes=10, seconds=15)
    with pytest.raises(LeaseHeld) as held:
        decide(state, AcquireLease("agent-1", TOKEN_2), in_grace)
    assert held.value.extra["retry_after_seconds"] == 45
    assert held.value.extra["next_required_action"] == "retry_after_stale_grace"
    stale = T0 + timedelta(minutes=11)
    [event] = decide(state, AcquireLease("agent-1", TOKEN_2), stale)
    assert event.kind == "lease.taken_over"
    assert event.data["previous_holder"] == "agent-1"
    assert event.data["generation"] == 2
    after = evolve(state, event)
    assert after.lease.token_sha256 == TOKEN_2 and after.lease_generation == 2


def test_only_the_goals_own_agent_may_hold_its_lease():
    from ledger.domain import DomainError

    with pytest.raises(DomainError) as error:
        decide(started(), AcquireLease("agent-2", TOKEN_2), T0 + timedelta(hours=1))
    assert error.value.code == "forbidden"


def test_after_a_takeover_the_old_generation_is_fenced_off():
    old = started()
    new = apply(old, AcquireLease("agent-1", TOKEN_2), T0 + timedelta(minutes=12))
    for command in (checkpoint(old, current_step="late"), Heartbeat(proof_of(old)),
                    ReleaseLease(proof_of(old)), completed(old)):
        with pytest.raises(LeaseLost) as lost:
            decide(new, command, T0 + timedelta(minutes=13))
        assert lost.value.extra["current_generation"] == 2


def test_fenced_calls_need_the_lease_and_the_right_token():
    state = started()
    with pytest.raises(LeaseRequired):
        decide(state, RecordCheckpoint(current_step="x", progress_pct=1), T0)
    wrong_token = LeaseProof(TOKEN_2, state.lease.generation)
    with pytest.raises(LeaseLost):
        decide(state, Heartbeat(wrong_token), T0)


def test_heartbeat_extends_and_release_frees_the_lease():
    state = started()
    renewed = apply(state, Heartbeat(proof_of(state)), T0 + timedelta(minutes=5))
    assert iso(renewed.lease.expires_at) == "2026-12-02T09:15:00.000000Z"
    assert lease_refusal(renewed, T0 + timedelta(minutes=11)) is not None
    released = apply(renewed, ReleaseLease(proof_of(renewed)))
    assert released.status == "waiting" and released.lease is None
    assert lease_refusal(released, T0) is None
    again = apply(released, AcquireLease("agent-1", TOKEN_2))
    assert again.lease.generation == 2  # generations never repeat
    with pytest.raises(LeaseLost):
        decide(released, Heartbeat(proof_of(renewed)), T0)


def test_a_checkpoint_may_release_the_lease():
    state = started()
    after = apply(state, checkpoint(state, progress_pct=40, release_lease=True))
    assert after.status == "waiting" and after.lease is None
    assert after.progress_pct == 40


def test_a_blocked_goal_grants_no_lease():
    state = started()
    blocked = apply(state, Finish("blocked", proof=proof_of(state)))
    with pytest.raises(GoalBlocked):
        decide(blocked, AcquireLease("agent-1", TOKEN_2), T0)
    assert lease_refusal(blocked, T0)["next_required_action"] == "operator_recover"


def test_workspace_release_by_holder_or_operator():
    state = started()
    with pytest.raises(LeaseRequired):
        decide(state, ReleaseWorkspace(), T0)
    by_holder = apply(state, ReleaseWorkspace(proof=proof_of(state)))
    assert not by_holder.workspace_bound
    assert decide(by_holder, ReleaseWorkspace(proof=proof_of(state)), T0) == []
    by_operator = apply(state, ReleaseWorkspace(by_operator=True, reason="stale binding"))
    assert not by_operator.workspace_bound


# ------------------------------------------------------------------ checkpoints


def test_checkpoint_contract_has_exactly_the_seed_fields():
    state = started()
    state = apply(state, checkpoint(state, current_step="tests", progress_pct=40,
                                    completed=("wrote test",), next_actions=("fix",)))
    contract = state.checkpoint_contract()
    assert tuple(contract) == CHECKPOINT_CONTRACT_FIELDS
    assert contract["task_id"] == "g-1"
    assert contract["goal"] == "Fix the flaky test"
    assert contract["progress_pct"] == 40
    assert contract["last_completed"] == ["wrote test"]


@pytest.mark.parametrize("pct", [-1, 101, 50.5, "50", True, None])
def test_checkpoint_rejects_progress_outside_0_to_100(pct):
    state = started()
    with pytest.raises(InvalidCommand) as error:
        decide(state, checkpoint(state, progress_pct=pct), T0)
    assert error.value.field == "progress_pct"


def test_progress_may_only_go_back_with_a_reason():
    state = started()
    state = apply(state, checkpoint(state, current_step="half", progress_pct=50))
    with pytest.raises(ProgressRegressed):
        decide(state, checkpoint(state, current_step="redo", progress_pct=30), T0)
    back = apply(state, checkpoint(state, current_step="redo", progress_pct=30,
                                   note="the migration was wrong; redoing it"))
    assert back.progress_pct == 30


def test_an_artifact_is_overwritten_only_with_its_previous_checksum():
    state = started()
    state = apply(state, checkpoint(state, artifacts=(Artifact("dist/app.whl", SHA_A, 10),)))
    with pytest.raises(ArtifactConflict):
        decide(state, checkpoint(state, artifacts=(Artifact("dist/app.whl", SHA_B, 12),)), T0)
    with pytest.raises(ArtifactConflict):
        decide(state, checkpoint(state, artifacts=(Artifact("dist/app.whl", SHA_B, 12, SHA_B),)),
               T0)
    after = apply(state, checkpoint(state, artifacts=(Artifact("dist/app.whl", SHA_B, 12,
                                                               SHA_A),)))
    assert after.artifacts == [{"path": "dist/app.whl", "sha256": SHA_B, "bytes": 12}]
    # The same checksum again is no overwrite.
    assert decide(after, checkpoint(after, artifacts=(Artifact("dist/app.whl", SHA_B, 12),)), T0)


@pytest.mark.parametrize("artifact, field", [
    (Artifact("", SHA_A, 1), "artifacts[0].path"),
    (Artifact("a", "A" * 64, 1), "artifacts[0].sha256"),
    (Artifact("a", "abc", 1), "artifacts[0].sha256"),
    (Artifact("a", SHA_A, -1), "artifacts[0].bytes"),
])
def test_artifact_shape_is_checked(artifact, field):
    state = started()
    with pytest.raises(InvalidCommand) as error:
        decide(state, checkpoint(state, artifacts=(artifact,)), T0)
    assert error.value.field == field


def test_oversized_lists_and_text_are_refused():
    state = started()
    with pytest.raises(InvalidCommand):
        decide(state, checkpoint(state, next_actions=tuple(["a"] * 101)), T0)
    with pytest.raises(InvalidCommand):
        decide(state, checkpoint(state, current_step="x" * 501), T0)


def test_a_checkpoint_resets_the_wake_retry_count():
    state = started().but(retry_count=3)
    assert apply(state, checkpoint(state)).retry_count == 0


# ------------------------------------------------------------------ finishing


@pytest.mark.parametrize("status, expected, reason", [
    ("completed", "done", ""),
    ("failed", "failed", ""),
    ("blocked", "blocked", "AGENT_BLOCKED"),
])
def test_finish(status, expected, reason):
    state = started()
    evidence = evidence_for(state) if status == "completed" else ()
    after = apply(state, Finish(status=status, summary="ok", proof=proof_of(state),
                                evidence=evidence))
    assert (after.status, after.reason, after.summary) == (expected, reason, "ok")
    assert after.lease is None


def test_completion_records_the_evidence_for_each_done_criterion_in_their_order():
    state = started(done_criteria=("tests pass", "PR opened"))
    events = decide(state, Finish("completed", "merged", proof_of(state), (
        Evidence("PR opened", "https://git.example/pr/12"),
        Evidence("tests pass", "make test: 212 passed"))), T0)
    completion = next(e for e in events if e.kind == "goal.completed")
    assert completion.data["summary"] == "merged"
    assert completion.data["evidence"] == [
        {"criterion": "tests pass", "evidence": "make test: 212 passed"},
        {"criterion": "PR opened", "evidence": "https://git.example/pr/12"}]


def test_a_goal_without_done_criteria_completes_with_a_summary_alone():
    state = started(done_criteria=())
    after = apply(state, Finish("completed", "nothing to prove", proof_of(state)))
    assert after.status == "done"
    with pytest.raises(InvalidCommand) as unknown:
        decide(state, Finish("completed", "x", proof_of(state), (Evidence("CI green", "ok"),)),
               T0)
    assert unknown.value.field == "evidence[0].criterion"


@pytest.mark.parametrize("summary, evidence, field", [
    ("", (Evidence("CI green", "run 4 green"),), "summary"),
    ("   ", (Evidence("CI green", "run 4 green"),), "summary"),
    ("merged", (), "evidence"),
    ("merged", (Evidence("CI green", "run 4 green"), Evidence("CI green", "again")),
     "evidence[1].criterion"),
    ("merged", (Evidence("CI green", "run 4 green"), Evidence("ci green", "x")),
     "evidence[1].criterion"),
    ("merged", (Evidence("CI green", ""),), "evidence[0].evidence"),
    ("merged", (Evidence("CI green", "  "),), "evidence[0].evidence"),
    ("merged", (Evidence("", "x"),), "evidence[0].criterion"),
    ("merged", (Evidence("CI green", "token ghp_" + "a" * 36),), "evidence[0].evidence"),
])
def test_completed_without_a_summary_or_full_evidence_is_refused(summary, evidence, field):
    state = started()
    with pytest.raises(InvalidCommand) as refused:
        decide(state, Finish("completed", summary, proof_of(state), evidence), T0)
    assert refused.value.field == field


def test_a_missing_criterion_is_named():
    state = started(done_criteria=("tests pass", "PR opened", "docs updated"))
    with pytest.raises(InvalidCommand) as refused:
        decide(state, Finish("completed", "merged", proof_of(state),
                             (Evidence("PR opened", "pr/12"),)), T0)
    assert refused.value.field == "evidence"
    assert "'tests pass'" in refused.value.detail and "'docs updated'" in refused.value.detail


@pytest.mark.parametrize("status", ["failed", "blocked"])
def test_failed_and_blocked_need_no_evidence_and_take_none(status):
    state = started()
    assert apply(state, Finish(status, "", proof_of(state))).status == status
    with pytest.raises(InvalidCommand) as refused:
        decide(state, Finish(status, "gave up", proof_of(state), evidence_for(state)), T0)
    assert refused.value.field == "evidence"


def test_finish_rejects_unknown_status_and_needs_the_lease():
    state = started()
    with pytest.raises(InvalidCommand):
        decide(state, Finish(status="paused", proof=proof_of(state)), T0)
    with pytest.raises(LeaseRequired):
        decide(state, Finish(status="completed"), T0)


@pytest.mark.parametrize("finish", ["completed", "failed"])
def test_a_terminal_goal_refuses_work(finish):
    state = started()
    ended = apply(state, Finish(status=finish, summary="ended", proof=proof_of(state),
                                evidence=evidence_for(state) if finish == "completed" else ()))
    for command in (checkpoint(state), completed(state),
                    AcquireLease("agent-1", TOKEN_2), start_command()):
        with pytest.raises(GoalTerminal):
            decide(ended, command, T0)


def test_commands_before_start_are_refused():
    with pytest.raises(GoalNotStarted):
        decide(GoalState(), RecordCheckpoint(current_step="x", progress_pct=1), T0)


def test_evolve_refuses_unknown_kinds_and_naive_times():
    state = started()
    with pytest.raises(ValueError, match="unknown event kind"):
        evolve(state, Event.stored("mystery.happened", {}, T0))
    with pytest.raises(ValueError):
        decide(state, checkpoint(state), T0.replace(tzinfo=None))


def test_updated_at_follows_the_event_time():
    state = started()
    later = T0 + timedelta(minutes=5, microseconds=7)
    assert iso(apply(state, checkpoint(state), later).updated_at) == "2026-12-02T09:05:00.000007Z"


# ------------------------------------------------------------------ smart wake


@pytest.mark.parametrize("timeout, estimate, needed, chunk", [
    (3600, 3000, True, 900),    # 3000 > 0.7 * 3600
    (3600, 2000, False, 900),
    (1800, None, None, 450),
    (None, 500, True, 300),     # no timeout: the lease (600 s) is the window
    (400, 100, False, 200),     # a short window gets half of itself
])
def test_preflight(timeout, estimate, needed, chunk):
    state = started(timeout_seconds=timeout, estimated_duration_seconds=estimate)
    answer = preflight(state, T0)
    assert answer["wakes_needed"] is needed
    assert answer["suggested_chunk_seconds"] == chunk
    assert 300 <= answer["suggested_chunk_seconds"] <= 900 or (timeout or 600) < 600


def test_preflight_autosave_deadline_is_the_earlier_of_timeout_and_lease():
    state = started(timeout_seconds=3600)
    # lease expires 09:10, 15 % of 600 s = 90 s before: 09:08:30; timeout 85 %: 09:51
    assert preflight(state, T0)["autosave_deadline"] == "2026-12-02T09:08:30.000000Z"
    unleased = started(leased=False, timeout_seconds=1000)
    assert preflight(unleased, T0)["autosave_deadline"] == "2026-12-02T09:14:10.000000Z"


def test_resume_packet():
    state = started()
    state = apply(state, checkpoint(state, current_step="tests", progress_pct=40,
                                    next_actions=("fix the bug",),
                                    artifacts=(Artifact("out.txt", SHA_A, 3),)))
    packet = resume_packet(state)
    assert packet["objective"] == "Fix the flaky test"
    assert packet["done_criteria"] == ["CI green"]
    assert packet["next_actions"] == ["fix the bug"]
    assert packet["checkpoint"]["current_step"] == "tests"
    assert packet["artifacts_to_verify"] == [{"path": "out.txt", "sha256": SHA_A, "bytes": 3}]


# ------------------------------------------------ old projections, the one catalogue of commands


def test_a_projection_stored_before_checkpointed_at_still_has_a_checkpoint_time():
    from ledger.domain import GoalState
    from ledger.domain.smartwake import resume_packet

    old = GoalState.from_dict({"goal_id": "g", "status": "waiting",
                               "updated_at": "2026-12-01T08:00:00.000000Z"})
    assert old.checkpoint_contract()["updated_at"] == "2026-12-01T08:00:00.000000Z"
    assert resume_packet(old)["checkpoint"]["updated_at"] == "2026-12-01T08:00:00.000000Z"


def test_every_command_of_the_domain_is_in_the_one_catalogue():
    """decider.COMMANDS lists every command and nothing else decides one."""
    import dataclasses
    import inspect

    from ledger.domain import (
        COMMANDS,
        claims,
        commands,
        continuations,
        dispatches,
        finishing,
        jobs,
        overdue,
        requested,
        runs,
        watchdogs,
    )
    from ledger.domain.codec import Payload

    defined = {obj for module in (commands, runs, watchdogs, claims, dispatches, jobs,
                                  finishing, requested, overdue, continuations)
               for _, obj in inspect.getmembers(module, inspect.isclass)
               if dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__
               and not issubclass(obj, Payload)  # the kinds declared beside their commands
               and obj.__name__ not in ("LeaseProof", "Artifact", "WakeRequest", "Evidence",
                                        "ScheduleRow", "Verdict", "Answer")}
    assert defined == set(COMMANDS)
    assert len(COMMANDS) == len(set(COMMANDS)) == 25
