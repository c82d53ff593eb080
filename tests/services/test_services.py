"""The application layer (ledger.services): its tokens and its callers.

The derived tokens are pinned: an outbox row written before an upgrade is sent
after it, and an idempotent replay may cross a deploy, so a derivation that
changed would hand over a lease nobody holds.
"""

import uuid

import pytest
from django.test import override_settings
from hypothesis import given
from hypothesis import strategies as st

from ledger.eventstore import store
from ledger.models import Event
from ledger.services import goals, operators, tokens, wakes
from ledger.services.goals import Caller

GOAL = "0f8fad5b-d9cb-469f-a165-70867728950e"


@override_settings(SECRET_KEY="pinned-key-for-the-test")
def test_derived_tokens_are_the_ones_earlier_releases_issued():
    # Computed with the three derivations this layer replaced
    # (continuations.dispatch_token, idempotency._derive, jobtokens.notify_token).
    assert tokens.dispatch_lease(GOAL, "internal:x@2026-12-04T09:00:00+00:00") == \
        "wll_fVZzulhWrObEkETiYNOtBpI_Vd8kdrhANJVR8DbwLAk"
    assert tokens.replayable_lease("agent-1", "key-1", "/api/v1/goals") == \
        "wll_H-rBdTQPMjGO6YLNeLFBVhs8zmAPsXc66AJmbJizdL4"
    assert tokens.notify_token(GOAL, "job-1") == \
        "wlj_0f8fad5bd9cb469fa16570867728950e_31ULHh7DILtF0TiHBLHm-r4YXc4OcuH5YfGlKWT95Lw"


def test_a_derivation_depends_on_the_secret_key():
    with override_settings(SECRET_KEY="one"):
        first = tokens.dispatch_lease(GOAL, "o")
    with override_settings(SECRET_KEY="two"):
        assert tokens.dispatch_lease(GOAL, "o") != first


@given(st.uuids(), st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
def test_a_notify_token_names_its_goal_and_only_its_job(goal, job, other):
    token = tokens.notify_token(str(goal), job)
    assert tokens.goal_of(token) == str(goal)
    assert tokens.issued_for(token, job)
    assert tokens.issued_for(token, other) == (other == job)
    # The same HMAC on another goal id is not a token this server issued.
    moved = f"{tokens.NOTIFY_PREFIX}{uuid.uuid4().hex}{token[len(tokens.NOTIFY_PREFIX) + 32:]}"
    assert not tokens.issued_for(moved, job)


@pytest.mark.parametrize("text", ["", "wll_abc", "wlj_xyz", "Bearer wlj_", "wlj_" + "0" * 32])
def test_what_is_not_a_notify_token_names_no_goal(text):
    assert tokens.goal_of(text) is None


def test_proof_keeps_only_the_digest():
    proof = tokens.proof({"token": "wll_secret", "generation": 3})
    assert proof.token_sha256 == tokens.digest("wll_secret") and proof.generation == 3
    assert "wll_secret" not in repr(proof)
    assert tokens.proof(None) is None


def test_another_agents_goal_is_not_found_and_nothing_is_recorded(started):
    goal_id, _lease = started()
    before = Event.objects.filter(goal_id=goal_id).count()
    with pytest.raises(store.GoalNotFound):
        wakes.claim(goal_id, source="host", occurrence_id="host:run-1", holder="agent-2",
                    actor="agent-2", owner="agent-2")
    with pytest.raises(store.GoalNotFound):
        goals.state_of(Caller("agent-2", owner="agent-2"), goal_id)
    assert Event.objects.filter(goal_id=goal_id).count() == before
    # Its own agent (and an operator, owner None) sees it.
    assert goals.state_of(Caller("agent-1", owner="agent-1"), goal_id).goal_id == goal_id
    assert goals.state_of(Caller("operator-1"), goal_id).goal_id == goal_id


def test_an_operator_act_is_offered_exactly_when_the_domain_accepts_it(started):
    goal_id, _lease = started()
    state = store.load(goal_id)
    offered = operators.refusals(state, "operator-1")
    assert offered["stop"] is None  # a running goal may be stopped
    assert offered["recover"] is not None  # nothing to recover
    acted = operators.act("stop", goal_id, operator="operator-1", reason="wrong repo")
    assert acted.state.status == "stopped" and acted.claim is None
    after = operators.refusals(acted.state, "operator-1")
    assert all(refusal is not None for refusal in after.values())


def test_the_ids_a_use_case_draws_come_from_one_injectable_source(db):
    """Random by default; the same for the same seed (the simulation's
    ``ids.Seeded``); an id a caller chose (``ids.given``) is the one used,
    once, and a random lease token keeps its shape."""
    from ledger.services import ids, jobs

    assert ids.new_id() != ids.new_id()
    with ids.use(ids.Seeded(7)):
        first = [ids.new_id(), ids.new_token()]
    with ids.use(ids.Seeded(7)):
        assert [ids.new_id(), ids.new_token()] == first
        assert tokens.random_lease() != "wll_" + first[1]  # the stream moved on
    assert str(uuid.UUID(first[0])) == first[0] and uuid.UUID(first[0]).version == 4
    assert len(first[1]) == 43  # 32 bytes, URL-safe base64, no padding

    with ids.given(GOAL, "job-7"):
        answer = goals.run_goal(Caller("agent-1"), "wll_given", workspace="/srv/ids",
                                goal_key="ids", objective="named ids")
        assert answer.state.goal_id == GOAL and answer.lease["acquired"]
        tracked = jobs.track(Caller("agent-1"), GOAL, tokens.proof(answer.lease["lease"]),
                             kind="ci", ref="run-1", link="", notify=True)
    assert tracked.job["job_id"] == "job-7"
    assert tracked.notify_token == tokens.notify_token(GOAL, "job-7")
    assert ids.new_id() not in {GOAL, "job-7"}  # what was given is gone with the block
