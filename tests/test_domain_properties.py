"""Property tests of the pure domain (hypothesis)."""

import json
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.domain import (
    TERMINAL_ALLOWED_KINDS,
    Artifact,
    DomainError,
    Finish,
    GoalState,
    RecordCheckpoint,
    StartGoal,
    decide,
    evolve,
    fold,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SHAS = ["0" * 64, "1" * 64, "2" * 64]

text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)
artifact = st.builds(Artifact, path=st.sampled_from(["a.txt", "b/c.py", "d"]),
                     sha256=st.sampled_from(SHAS), bytes=st.integers(0, 10_000),
                     previous_sha256=st.none() | st.sampled_from(SHAS))
checkpoint = st.builds(
    RecordCheckpoint,
    current_step=text,
    progress_pct=st.integers(-5, 105),
    completed=st.lists(text, max_size=3).map(tuple),
    next_actions=st.lists(text, max_size=3).map(tuple),
    artifacts=st.lists(artifact, max_size=3).map(tuple),
    errors=st.lists(text, max_size=2).map(tuple),
    note=text,
)
finish = st.builds(Finish, status=st.sampled_from(["completed", "failed", "blocked", "bogus"]),
                   summary=text)
start = st.builds(StartGoal, goal_id=st.just("g"), workspace=st.just("/w"),
                  goal_key=st.just("k"), objective=text, next_actions=st.lists(text, max_size=3)
                  .map(tuple))
command = st.one_of(checkpoint, checkpoint, checkpoint, finish, start)
histories = st.lists(command, max_size=25)


def run(commands, *, roundtrip: bool):
    """Apply commands one at a time the way the store does; collect all events."""
    state, events, now = GoalState(), [], T0
    for cmd in [StartGoal(goal_id="g", workspace="/w", goal_key="k", objective="o"), *commands]:
        now += timedelta(seconds=1)
        try:
            new = decide(state, cmd, now)
        except DomainError:
            continue
        for event in new:
            state = evolve(state, event)
        events.extend(new)
        if roundtrip:  # the store keeps the state as JSON between commands
            state = GoalState.from_dict(json.loads(json.dumps(state.to_dict())))
    return state, events


@settings(max_examples=200)
@given(histories)
def test_folding_one_at_a_time_equals_folding_all_at_once(commands):
    incremental, events = run(commands, roundtrip=True)
    assert fold(events) == incremental
    assert incremental.version == len(events)


@settings(max_examples=200)
@given(histories, st.lists(command, min_size=1, max_size=10))
def test_a_terminal_goal_only_gets_the_events_design_allows(prefix, probes):
    state, _ = run([*prefix, Finish(status="completed")], roundtrip=False)
    assert state.terminal
    for probe in probes:
        try:
            events = decide(state, probe, T0 + timedelta(days=1))
        except DomainError:
            continue
        assert {e.kind for e in events} <= TERMINAL_ALLOWED_KINDS


@settings(max_examples=200)
@given(histories)
def test_progress_only_goes_back_with_a_note(commands):
    state, events = run(commands, roundtrip=False)
    previous = 0
    for event in events:
        if event.kind == "checkpoint.recorded":
            if event.data["progress_pct"] < previous:
                assert event.data["note"].strip()
            previous = event.data["progress_pct"]
    assert 0 <= state.progress_pct <= 100


@settings(max_examples=200)
@given(histories)
def test_an_accepted_overwrite_always_stated_the_previous_checksum(commands):
    state = fold(decide(GoalState(), StartGoal(goal_id="g", workspace="/w", goal_key="k",
                                               objective="o"), T0))
    for cmd in commands:
        try:
            events = decide(state, cmd, T0)
        except DomainError:
            continue
        if isinstance(cmd, RecordCheckpoint):
            for a in cmd.artifacts:
                before = state.artifact(a.path)
                if before is not None and before["sha256"] != a.sha256:
                    assert a.previous_sha256 == before["sha256"]
        state = fold(events, state)
    paths = [a["path"] for a in state.artifacts]
    assert len(paths) == len(set(paths))
