"""Property tests of the pure domain (hypothesis).

Histories are generated as steps: a command template, how much time passes
before it, and which lease proof it presents (the current one, a stale
generation, a wrong token, or none). The proof is filled in from the state at
the moment the step runs, as a real agent would.
"""

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ledger.domain import (
    AcquireLease,
    Artifact,
    DomainError,
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
    decision,
    evolve,
    fold,
    liveness,
    validation,
)
from ledger.domain.claimed import CONSUMING
from ledger.domain.claims import ClaimWake, WakeNow, claim_outcome
from ledger.domain.commands import Evidence
from ledger.domain.errors import InvalidCommand, LeaseLost
from ledger.domain.overdue import CheckLiveness
from ledger.domain.parts import PARTS, Ready, Watchdog
from ledger.domain.policy import LEASE_STALE_GRACE_SECONDS
from ledger.domain.runs import (
    CLASSES,
    Recover,
    ReportRun,
    RequestApproval,
    ResolveApproval,
    Stop,
)
from ledger.domain.state import FIELD_DEFAULTS, TIME_FIELDS
from ledger.domain.timing import slot_of
from ledger.domain.watchdogs import PrepareWatchdog
from tests.domain.test_domain_wakes import TERMINAL_ALLOWED_KINDS

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SHAS = ["0" * 64, "1" * 64, "2" * 64]
TOKENS = ["a" * 64, "b" * 64, "c" * 64]
CRITERIA = ("tests pass", "PR opened")
START = StartGoal(goal_id="g", workspace="/w", goal_key="k", objective="o",
                  done_criteria=CRITERIA)
FULL_EVIDENCE = tuple(Evidence(c, f"shown: {c}") for c in CRITERIA)


@dataclass(frozen=True)
class Step:
    template: Any
    proof: str  # current | stale | wrong | none
    advance: int  # seconds before the step


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
    release_lease=st.booleans(),
)
# Evidence: mostly the full set (so goals do complete), else any mix of known,
# unknown, repeated and blank items, which a completion must refuse.
evidence_item = st.builds(Evidence, criterion=st.sampled_from([*CRITERIA, "unknown", ""]),
                          evidence=st.sampled_from(["ci run 7 green", "", " "]) | text)
evidence = st.one_of(st.just(FULL_EVIDENCE), st.just(FULL_EVIDENCE[::-1]),
                     st.lists(evidence_item, max_size=4).map(tuple))
finish = st.builds(Finish, status=st.sampled_from(["completed", "failed", "blocked", "bogus"]),
                   summary=st.just("merged") | text, evidence=evidence)
acquire = st.builds(AcquireLease, holder=st.sampled_from(["agent-1", "agent-2"]),
                    token_sha256=st.sampled_from(TOKENS))
runs = st.builds(ReportRun, proof=st.none(), outcome=st.sampled_from(["ok", "error"]),
                 error_class=st.sampled_from(CLASSES),
                 reset_at=st.none() | st.just(T0 + timedelta(hours=3)),
                 reset_schedule_name=st.just("reset-g"))
wakes_ = st.builds(ClaimWake, occurrence_id=st.sampled_from(["o1", "o2", "o3", "o4", ""]),
                   source=st.sampled_from(["internal", "host"]), holder=st.just(""),
                   token_sha256=st.sampled_from(TOKENS), push=st.booleans(),
                   kind=st.sampled_from(["recurring", "recurring", "reset"]))
operator = st.one_of(
    st.builds(ResolveApproval, gate=st.just("deploy"),
              decision=st.sampled_from(["approve", "reject"]), operator=st.just("op")),
    st.builds(Recover, operator=st.just("op"), reason=st.just("because")),
    st.builds(Stop, operator=st.just("op"), reason=st.just("enough")),
    st.builds(WakeNow, operator=st.just("op"), reason=st.just("now"),
              occurrence_id=st.sampled_from(["op-1", "op-2"]), token_sha256=st.just(TOKENS[2]),
              push=st.booleans()),
)
templates = st.one_of(checkpoint, checkpoint, checkpoint, finish, acquire, acquire,
                      st.just(Heartbeat(None)), st.just(ReleaseLease(None)),
                      st.just(ReleaseWorkspace()), st.just(START), runs, wakes_,
                      st.just(CheckLiveness()), st.just(RequestApproval(None, "deploy")),
                      st.just(PrepareWatchdog(None, 3600, "UTC", "wd-g")), operator)
steps = st.builds(Step, template=templates,
                  proof=st.sampled_from(["current", "current", "current", "stale", "wrong",
                                         "none"]),
                  advance=st.sampled_from([0, 5, 120, 630, 700, 3600]))
histories = st.lists(steps, max_size=30)


def with_proof(step: Step, state: GoalState) -> Any:
    template = step.template
    if not hasattr(template, "proof"):
        return template
    if step.proof == "none" or not state.lease_generation:
        proof = None
    else:
        token = state.lease.token_sha256 if state.lease else TOKENS[0]
        generation = state.lease.generation if state.lease else state.lease_generation
        proof = {
            "current": LeaseProof(token, generation),
            "stale": LeaseProof(token, generation - 1),
            "wrong": LeaseProof("f" * 64, generation),
        }[step.proof]
    values = {name: getattr(template, name) for name in template.__slots__}
    return type(template)(**{**values, "proof": proof})


AUTOMATIC = (ClaimWake, CheckLiveness, AcquireLease)


def run(history: list[Step], *, roundtrip: bool = False):
    """Apply steps one at a time the way the store does. Returns the final
    state, all events, and (command, state before, now, events) per step."""
    now = T0
    state = fold(decide(GoalState(), RunGoal(START, "agent-1", TOKENS[0]), now))
    events = list(decide(GoalState(), RunGoal(START, "agent-1", TOKENS[0]), now))
    trace = []
    for step in history:
        now += timedelta(seconds=step.advance)
        command = with_proof(step, state)
        try:
            new = decide(state, command, now)
        except DomainError as error:
            trace.append((command, state, now, error))
            continue
        trace.append((command, state, now, new))
        for event in new:
            state = evolve(state, event)
        events.extend(new)
        if roundtrip:  # the store keeps the state as JSON between commands
            state = GoalState.from_dict(json.loads(json.dumps(state.to_stored())))
    return state, events, trace


@settings(max_examples=300)
@given(histories)
def test_folding_one_at_a_time_equals_folding_all_at_once(history):
    incremental, events, _ = run(history, roundtrip=True)
    assert fold(events) == incremental
    assert incremental.version == len(events)


@settings(max_examples=300)
@given(histories)
def test_a_decisions_state_is_the_fold_of_its_events(history):
    # The store records decision().state without folding the events again:
    # it must be exactly what folding them gives, version included.
    _, _, trace = run(history, roundtrip=True)
    for command, before, now, outcome in trace:
        if isinstance(outcome, DomainError):
            continue
        decided = decision(before, command, now)
        assert decided.events == outcome
        assert decided.state == fold(outcome, before)
        assert decided.state.version == before.version + len(outcome)


@settings(max_examples=200)
@given(histories, st.lists(steps, min_size=1, max_size=10))
def test_a_terminal_goal_only_gets_the_events_design_allows(prefix, probes):
    state, _, _ = run(prefix)
    assume(state.status != "blocked")  # only an operator (a later issue) moves it on
    if not state.terminal:
        if not state.lease:
            state = fold(decide(state, AcquireLease("agent-9", TOKENS[2]), T0 + timedelta(
                days=30)), state)
        token, generation = state.lease.token_sha256, state.lease.generation
        state = fold(decide(state, Finish("completed", "merged", LeaseProof(token, generation),
                                          FULL_EVIDENCE),
                            T0 + timedelta(days=30)), state)
    assert state.terminal
    for probe in probes:
        try:
            events = decide(state, with_proof(probe, state), T0 + timedelta(days=31))
        except DomainError:
            continue
        # A recovery ends the terminal state; what it sets up after (its
        # re-armed watchdog) belongs to a goal that is active again.
        kinds = [e.kind for e in events]
        upto = kinds.index("goal.recovered") + 1 if "goal.recovered" in kinds else len(kinds)
        assert set(kinds[:upto]) <= TERMINAL_ALLOWED_KINDS


@settings(max_examples=300)
@given(histories)
def test_only_the_current_lease_holder_changes_work(history):
    """Fencing: every accepted fenced command presented the current generation
    and token; a stale generation or a wrong token is always lease_lost."""
    _, _, trace = run(history)
    for command, before, _now, outcome in trace:
        proof = getattr(command, "proof", "n/a")
        if proof == "n/a" or isinstance(command, ReleaseWorkspace):
            continue
        if isinstance(outcome, list) and not before.terminal:
            assert proof is not None
            assert proof.generation == before.lease.generation
            assert proof.token_sha256 == before.lease.token_sha256
        if proof is not None and before.lease and not before.terminal and (
                proof.generation != before.lease.generation
                or proof.token_sha256 != before.lease.token_sha256):
            assert isinstance(outcome, LeaseLost)


@settings(max_examples=300)
@given(histories)
def test_generations_only_grow_and_a_live_lease_is_never_taken(history):
    _, events, trace = run(history)
    generations = [e.data["generation"] for e in events
                   if e.kind in ("lease.acquired", "lease.taken_over")]
    assert generations == sorted(set(generations))
    for _command, before, now, outcome in trace:
        if isinstance(outcome, list) and any(e.kind == "lease.taken_over" for e in outcome):
            expires = before.lease.expires_at
            assert now >= expires + timedelta(seconds=LEASE_STALE_GRACE_SECONDS)


@settings(max_examples=200)
@given(histories)
def test_progress_only_goes_back_with_a_note(history):
    state, events, _ = run(history)
    previous = 0
    for event in events:
        if event.kind == "checkpoint.recorded":
            if event.data["progress_pct"] < previous:
                assert event.data["note"].strip()
            previous = event.data["progress_pct"]
    assert 0 <= state.progress_pct <= 100


@settings(max_examples=200)
@given(histories)
def test_an_accepted_overwrite_always_stated_the_previous_checksum(history):
    state, _, trace = run(history)
    for command, before, _now, outcome in trace:
        if isinstance(command, RecordCheckpoint) and isinstance(outcome, list):
            for a in command.artifacts:
                recorded = before.artifact(a.path)
                if recorded is not None and recorded["sha256"] != a.sha256:
                    assert a.previous_sha256 == recorded["sha256"]
    paths = [a["path"] for a in state.artifacts]
    assert len(paths) == len(set(paths))


@settings(max_examples=200)
@given(histories)
def test_status_and_lease_agree(history):
    state, _, trace = run(history)
    for _command, before, _now, _outcome in [*trace, (None, state, None, None)]:
        if before.status == "running":
            assert before.lease
        if before.lease:
            assert before.status == "running"


@settings(max_examples=300)
@given(histories)
def test_no_automatic_path_leaves_an_approval_gate(history):
    """Approval gates are never crossed: only an operator's decision moves a goal
    out of BLOCKED_APPROVAL."""
    _, _, trace = run(history)
    for command, before, _now, outcome in trace:
        if before.reason == "BLOCKED_APPROVAL" and isinstance(outcome, list) and outcome:
            after = fold(outcome, before)
            if isinstance(command, (*AUTOMATIC, RunGoal)):
                assert (after.status, after.reason) == ("blocked", "BLOCKED_APPROVAL")
                assert not after.lease


@settings(max_examples=300)
@given(histories)
def test_the_continuation_budget_is_never_exceeded(history):
    """The continuation budget: charges never pass max_continuations; only
    recover starts a new budget."""
    state, events, _ = run(history)
    used = 0
    for event in events:
        if event.kind == "goal.recovered":
            used = 0
        if event.kind == "continuation.charged":
            used += 1
            assert event.data["attempt"] == used <= event.data["max"]
    assert state.continuations_used == used


@settings(max_examples=300)
@given(histories)
def test_every_granted_wake_is_charged_first(history):
    _, _, trace = run(history)
    for command, _before, _now, outcome in trace:
        if isinstance(command, ClaimWake) and isinstance(outcome, list):
            kinds = [e.kind for e in outcome]
            if any(k.startswith("lease.acquired") or k == "lease.taken_over" for k in kinds):
                assert "continuation.charged" in kinds
                assert kinds.index("continuation.charged") < len(kinds) - 1


# ------------------------------------------------------------------ liveness and wake timing


@settings(max_examples=300)
@given(histories)
def test_every_active_goal_has_a_deadline_or_a_reason_for_a_human(history):
    """Liveness by evidence: after every command, an active goal expects some
    evidence by a deadline, or is listed for a human with a reason."""
    _state, _events, trace = run(history)
    for _command, before, _now, result in trace:
        if isinstance(result, DomainError):
            continue
        after = fold(result, before)
        if after.terminal:
            continue
        assert liveness.expectation(after).deadline is not None or liveness.attention(after), (
            after.status, after.reason, after.watchdog)


@settings(max_examples=300)
@given(histories)
def test_a_passed_deadline_is_acted_on_or_listed(history):
    """The sweeper at a passed deadline (every row reported missing) leaves
    the goal ended, listed for a human, or with a deadline still ahead: no goal
    stays past its deadline unseen. Two sweeps at most (an expired lease
    first, then what the goal without it waits for)."""
    _state, _events, trace = run(history)
    for _command, before, _now, result in trace:
        if isinstance(result, DomainError):
            continue
        state = fold(result, before)
        deadline = liveness.expectation(state).deadline
        if state.terminal or deadline is None:
            continue
        now = max(deadline, state.updated_at) + timedelta(seconds=1)
        for _sweep in range(3):
            state = fold(decide(state, CheckLiveness(rows=()), now), state)
        after = liveness.expectation(state).deadline
        assert state.terminal or liveness.attention(state) or (after and after > now), (
            state.status, state.lease, state.ready, state.watchdog)


@settings(max_examples=300)
@given(histories)
def test_claims_that_are_not_granted_consume_nothing_and_never_move_the_anchor(history):
    _state, _events, trace = run(history)
    for command, before, _now, result in trace:
        if not isinstance(command, ClaimWake) or isinstance(result, DomainError):
            continue
        after = fold(result, before)
        outcomes = [e.data["outcome"] for e in result if e.kind == "wake.claimed"]
        if outcomes and outcomes[0] not in CONSUMING:
            assert after.claimed == before.claimed
        if before.watchdog and before.watchdog.anchor and after.watchdog \
                and after.watchdog.anchor:
            assert after.watchdog.anchor == before.watchdog.anchor


@settings(max_examples=300)
@given(histories)
def test_only_recovery_continuations_are_charged(history):
    """The continuation budget: a charge follows an unclean end (an expired or stale lease, a
    rate limit), never a clean release followed by the next slot."""
    _state, _events, trace = run(history)
    for command, before, _now, result in trace:
        if isinstance(result, DomainError) or not any(
                e.kind == "continuation.charged" for e in result):
            continue
        assert (before.lease or before.lease_end == "expired" or before.paused_until
                or (before.ready and before.ready.charge)), (type(command).__name__,
                                                             before.lease_end)


@settings(max_examples=500)
@given(anchor_minute=st.integers(0, 59), interval=st.sampled_from([60, 600, 3600, 86400]),
       k=st.integers(0, 1000), delay=st.floats(-0.49, 0.49))
def test_a_fire_belongs_to_its_nearest_slot(anchor_minute, interval, k, delay):
    """No drift: a fire up to half an interval late or early belongs to the
    slot it was meant for, so later slots never shift."""
    anchor = T0 + timedelta(minutes=anchor_minute)
    watchdog = Watchdog(backend="internal", interval_seconds=interval, tzid="UTC",
                        status="live", anchor=anchor)
    slot = anchor + timedelta(seconds=k * interval)
    fired = slot + timedelta(seconds=delay * interval)
    assert slot_of(watchdog, fired) == slot


@settings(max_examples=300)
@given(histories)
def test_a_goal_completes_only_with_a_summary_and_evidence_for_each_done_criterion(history):
    """Item 7: every goal.completed a finish produced carries a non-blank summary
    and exactly one non-blank evidence item per done criterion, in their order;
    every finish that is not completed records none."""
    _state, _events, trace = run(history)
    for command, _before, _now, result in trace:
        if not isinstance(command, Finish) or isinstance(result, DomainError):
            continue
        for event in result:
            if event.kind in ("goal.completed", "goal.finish_requested") \
                    and event.data.get("status", "completed") == "completed":
                assert event.data["summary"].strip()
                assert [i["criterion"] for i in event.data["evidence"]] == list(CRITERIA)
                assert all(i["evidence"].strip() for i in event.data["evidence"])
        if command.status != "completed":
            assert not command.evidence



def test_the_generated_histories_still_complete_goals():
    """The finishes generated above do complete goals, so the property before
    this one is not vacuous: hypothesis finds a history that ends done."""
    from hypothesis import find

    found = find(histories, lambda h: run(h)[0].status == "done",
                 settings=settings(max_examples=2000, database=None))
    assert run(found)[0].status == "done"


# ------------------------------------------------------------------ rules decided once


RATE_LIMITED_STEP = Step(ReportRun(None, "error", "rate_limit"), "current", 0)


@settings(max_examples=200)
@given(histories, st.integers(min_value=0, max_value=4 * 3600))
def test_a_pause_holds_a_lease_a_wake_and_a_pull_alike(history, later):
    """timing.pause_left is the one "paused, not yet due": while it is positive
    no lease is granted (and the refusal's wait is it), no pull resumes the goal
    and no scheduler claim resumes it; once it is 0 the pause holds nothing."""
    from ledger.domain import leases, pulls, timing

    _, _, trace = run([RATE_LIMITED_STEP, *history])  # the first step pauses the goal
    for _, state, now, _ in trace:
        moment = now + timedelta(seconds=later)
        wait = timing.pause_left(state, moment)
        if state.paused_until and state.status == "paused":
            until = state.paused_until
            assert (wait > 0) == (moment < until)
        else:
            assert wait == 0
        if wait:
            refusal = leases.lease_refusal(state, moment)
            assert refusal is not None and refusal["retry_after_seconds"] == wait
            assert pulls.due_for_pull(state, moment) == bool(state.ready)
            answer = claim_outcome(state, ClaimWake("probe", "internal", "", TOKENS[0]), moment)
            assert answer["outcome"] not in ("recurring_acquired", "ready_for_pull")


@settings(max_examples=100)
@given(st.integers(min_value=0, max_value=6), st.integers(min_value=0, max_value=5))
def test_the_budget_blocks_a_wake_a_pull_and_a_rate_limit_alike(used, budget):
    """runs.budget_block is the one "budget spent -> block": a recovery wake, a
    pull of a charged due wake and a rate limit block exactly when the budget
    is spent, with the same reason."""
    from ledger.domain import pulls
    from ledger.domain.runs import budget_block, budget_left, report

    start = StartGoal(**{**{name: getattr(START, name) for name in START.__slots__},
                         "policy": {"max_continuations": budget}})
    state = fold(decide(GoalState(), RunGoal(start, "agent-1", TOKENS[0]), T0))
    state = state.but(continuations_used=used)
    spent = used >= budget
    assert (budget_left(state) == 0) == spent
    assert (budget_block(state, rate_limited=True) == "RATE_LIMIT_STOPPED") == spent
    assert (budget_block(state, rate_limited=False) == "CONTINUATION_STOPPED") == spent
    lease = state.lease
    rate_limit = ReportRun(LeaseProof(lease.token_sha256, lease.generation), "error",
                           "rate_limit")
    blocked = [e.data["reason"] for e in report(state, rate_limit, T0)
               if e.kind == "goal.blocked"]
    assert blocked == (["RATE_LIMIT_STOPPED"] if spent else [])
    stale = T0 + timedelta(hours=2)  # its lease went stale: a wake now is a recovery
    answer = claim_outcome(state, ClaimWake("probe", "internal", "", TOKENS[1]), stale)
    assert (answer.get("block") == "CONTINUATION_STOPPED") == spent
    ready = state.but(lease=None, ready=Ready(occurrence_id="o", reason="timeout_recovery",
                                              at=T0, charge=True))
    pulled = pulls.pull_events(ready, "agent-1", TOKENS[1], stale)
    assert ([e.data["reason"] for e in pulled if e.kind == "goal.blocked"]
            == (["CONTINUATION_STOPPED"] if spent else []))


@settings(max_examples=200)
@given(histories, st.integers(min_value=0, max_value=3 * 86_400))
def test_overdue_reads_the_same_in_the_label_the_alert_and_the_query(history, later):
    """liveness.overdue is the one "overdue": the label says overdue only when
    the alert says OVERDUE, and the /alerts query's cutoff is the same bound."""
    _, _, trace = run(history)
    for _, state, now, _ in trace:
        moment = now + timedelta(seconds=later)
        deadline = liveness.expectation(state).deadline
        assert liveness.overdue(deadline, moment) == (
            deadline is not None and deadline < liveness.overdue_cutoff(moment))
        if liveness.label(state, moment) == liveness.OVERDUE:
            assert liveness.alert(state, moment) == liveness.OVERDUE_REASON


@settings(max_examples=200)
@given(histories)
def test_a_stored_state_is_the_fields_off_their_defaults_and_reads_back_whole(history):
    """GoalState.to_stored leaves out exactly the fields at their defaults
    (value and type), and from_dict gives the same state back."""
    state, _, _ = run(history, roundtrip=True)
    stored = state.to_stored()
    assert {name for name, value in state.__dict__.items()
            if value == FIELD_DEFAULTS[name] and type(value) is type(FIELD_DEFAULTS[name])} \
        == set(state.__dict__) - set(stored)
    assert GoalState.from_dict(json.loads(json.dumps(stored))) == state


@settings(max_examples=200)
@given(histories)
def test_the_deadline_column_is_the_expectation_without_its_texts(history):
    """``deadline_at`` (every command's projection) asks for the expectation
    without its texts: the same label, evidence and deadline as the full one,
    on every state a history passes through."""
    state, _, trace = run(history)
    for _, before, _, _ in [*trace, (None, state, None, None)]:
        full = liveness.expectation(before)
        short = liveness.expectation(before, explain=False)
        assert short == replace(full, detail="")
        assert liveness.deadline_at(before) == full.deadline


def _per_item(values: list, limit: int) -> Any:
    """text_list as it was: every item through validation.text, by name."""
    try:
        return [validation.text(v, f"f[{i}]", limit=limit, scan=False)
                for i, v in enumerate(values)]
    except InvalidCommand as error:
        return (error.code, error.field, str(error))


@settings(max_examples=300)
@given(st.lists(st.one_of(st.text(max_size=12), st.sampled_from(["a\x00b", "\ud800", "é", ""]),
                          st.integers(), st.none()), max_size=5),
       st.integers(min_value=0, max_value=10))
def test_a_text_list_cleared_by_the_scan_is_checked_as_each_text_would_be(values, limit):
    try:
        got: Any = validation.text_list(values, "f", limit=limit, scan=False)
    except InvalidCommand as error:
        got = (error.code, error.field, str(error))
    assert got == _per_item(values, limit)


@settings(max_examples=200)
@given(histories, st.dictionaries(st.sampled_from(["junk", "status", "claimed", "lease"]),
                                  st.none(), max_size=2))
def test_from_dict_makes_what_the_constructor_makes(history, extra):
    """GoalState.from_dict builds the instance dict itself: the same fields,
    in declaration order, as the dataclass's __init__, with every empty list
    or dict its own (a default_factory's), unknown keys ignored."""
    state, _, _ = run(history)
    for data in (state.to_stored(), {**state.to_stored(), **extra}, {}):
        made = GoalState.from_dict(data)
        expected = GoalState(**{k: _value(k, v) for k, v in data.items() if k in FIELD_DEFAULTS})
        assert made == expected and list(made.__dict__) == list(expected.__dict__)
        again = GoalState.from_dict(data)
        for name, value in made.__dict__.items():
            if isinstance(value, list | dict) and name not in data:
                assert value is not again.__dict__[name] and value is not FIELD_DEFAULTS[name]


def _value(name: str, stored: Any) -> Any:
    """A stored field as the state holds it: a part's value, a time's datetime."""
    if name in PARTS:
        return PARTS[name].of(stored)
    if name in TIME_FIELDS:
        return datetime.fromisoformat(stored) if stored else None
    return stored


def test_a_copy_of_a_state_takes_field_names_only():
    state = GoalState().but(version=2, status="waiting")
    assert (state.version, state.status) == (2, "waiting")
    with pytest.raises(TypeError, match="no field nope, zzz"):
        state.but(zzz=1, nope=2, version=3)


@given(binds=st.sampled_from([None, "workspace", "session"]),
       workspace_holder=st.sampled_from([None, "g", "other"]),
       session_holder=st.sampled_from([None, "g", "other"]))
def test_a_start_is_refused_only_by_what_its_goal_binds(binds, workspace_holder,
                                                         session_holder):
    """What a goal binds decides what another goal can refuse it: a goal that
    binds its session (sessions sharing one workspace) is never refused for
    the workspace and never binds it; every goal is refused a session key
    another active goal holds; no goal is refused by its own binding."""
    from ledger.domain.errors import SessionBound, WorkspaceBound

    session = {"session_key": "agent:main:k", **({"binds": binds} if binds else {})}
    start = replace(START, session=session, workspace_bound_by=workspace_holder,
                    session_bound_by=session_holder)
    by_session = binds == "session"
    try:
        events = decide(GoalState(), start, T0)
    except WorkspaceBound:
        assert not by_session and workspace_holder == "other"
        return
    except SessionBound:
        assert session_holder == "other" and (by_session or workspace_holder != "other")
        return
    assert session_holder != "other" and (by_session or workspace_holder != "other")
    state = fold(events)
    assert state.workspace_bound is not by_session
    assert ("workspace.bound" in [e.kind for e in events]) is not by_session
