"""The rolling comparison of sealed events with their stored leaves
(ledger/log/leafcheck.py): a sealed event rewritten by SQL alone, its goal's
hash chain recomputed with the formula in docs/integrity.md, raises the
sealer's alarm at the next seal and the doctor's, with no head kept outside.
"""

import math

import pytest
from django.db import connection
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from ledger.eventstore import triggers
from ledger.log import leafcheck, sealer_state, sealing
from ledger.models import Event, LogLeaf, TreeHead
from tests.factories import GoalFactory
from tests.helpers import ledger
from tests.log.test_log_attacks import json_value, rehash_goal, sql


def rewrite_checkpoint(event: Event, step: str = "forged by SQL") -> None:
    """A DBA's rewrite: the payload changed, the goal's chain recomputed."""
    sql("UPDATE ledger_event SET data = %s WHERE id = %s",
        json_value({**event.data, "current_step": step}), event.id)
    rehash_goal(event.goal_id)


@pytest.fixture
def sealed(db, sealer_record):
    goals = [GoalFactory(checkpoints=3), GoalFactory(checkpoints=2)]
    sealing.seal()
    triggers.drop(connection)
    return goals


def test_an_sql_rewrite_of_a_sealed_event_raises_the_sealers_alarm(sealed):
    victim = Event.objects.filter(goal=sealed[0], kind="checkpoint.recorded").first()
    rewrite_checkpoint(victim)
    code, out, _ = ledger("verify")
    assert code == 0 and "0 broken" in out  # every chain is whole again
    GoalFactory()  # something new to seal: the sealer would sign
    heads = TreeHead.objects.count()
    code, out, err = ledger("seal")
    assert code == 3 and "ALARM: no head signed" in err, out + err
    assert TreeHead.objects.count() == heads
    position = LogLeaf.objects.get(event_id=victim.id).position
    alarm = sealer_state.inconsistency_alarm()
    assert f"leaf {position}: event {victim.id}" in alarm and "changed after it was sealed" in alarm
    code, out, err = ledger("doctor")
    assert code != 0 and f"leaf {position}: event {victim.id}" in out + err, out + err
    code, out, err = ledger("verify")  # the chains recompute, but nothing is "verified"
    assert code == 1 and "NOT verified: the log's alarm is raised" in out, out + err
    assert "verified 3 goal(s)" not in out


def test_the_doctor_finds_the_rewrite_before_any_seal(sealed):
    victim = Event.objects.filter(goal=sealed[1]).order_by("seq").first()
    rewrite_checkpoint(victim, "the doctor's turn")
    assert sealer_state.inconsistency_alarm() is None
    code, out, err = ledger("doctor")
    assert code != 0 and "ALARM" in out + err and f"event {victim.id}" in out + err, out + err
    assert sealer_state.inconsistency_alarm()  # raised: the sealer, metrics and admin see it


def test_an_old_rewrite_is_found_as_the_window_wraps_and_the_alarm_stays(sealed, monkeypatch):
    monkeypatch.setattr(leafcheck, "WINDOW", 2)
    monkeypatch.setattr(leafcheck, "NEWEST", 1)
    size = LogLeaf.objects.count()
    sealing.seal()  # the cursor moves past the first leaves
    victim = Event.objects.get(id=LogLeaf.objects.get(position=0).event_id)
    rewrite_checkpoint(victim)
    raised = 0
    for _ in range(math.ceil(size / 2) + 1):
        try:
            sealing.seal()
        except sealer_state.LogInconsistent:
            raised += 1
            break
    assert raised, "the window never reached leaf 0"
    # The cursor moves on; the suspect is compared on every later run.
    for _ in range(size):
        with pytest.raises(sealer_state.LogInconsistent, match="no longer matches its stored leaf"):
            sealing.seal()
    # Put back as it was: the comparison is clean again and a new head is signed.
    sql("UPDATE ledger_event SET data = %s WHERE id = %s", json_value(victim.data), victim.id)
    rehash_goal(victim.goal_id)
    GoalFactory()
    assert sealing.seal().head is not None
    assert sealer_state.inconsistency_alarm() is None


def test_a_clean_log_is_compared_without_an_alarm(sealed):
    done = leafcheck.run()
    assert done.compared == LogLeaf.objects.count() and done.mismatches == []


@hypothesis_settings(max_examples=200, deadline=None)
@given(size=st.integers(0, 5000), cursor=st.integers(-10, 6000),
       window=st.integers(1, 700), newest=st.integers(0, 300),
       suspects=st.lists(st.integers(-5, 6000), max_size=5))
def test_every_leaf_is_compared_within_a_bounded_number_of_runs(size, cursor, window, newest,
                                                                 suspects):
    covered: set[int] = set()
    runs = math.ceil(size / window) + 1
    for run in range(runs):
        planned = leafcheck.plan(size, cursor, suspects if run == 0 else (),
                                 window=window, newest=newest)
        positions = [p for start, end in planned.ranges for p in range(start, end)]
        # Disjoint, in order, inside the tree, bounded per run.
        assert positions == sorted(set(positions))
        assert all(0 <= p < size for p in positions)
        assert len(positions) <= window + newest + len(suspects)
        assert set(range(max(0, size - newest), size)) <= set(positions)
        assert {p for p in suspects if 0 <= p < size} <= set(positions) or run > 0
        covered.update(positions)
        cursor = planned.next_cursor
        assert 0 <= cursor < max(1, size)
    assert covered == set(range(size))
