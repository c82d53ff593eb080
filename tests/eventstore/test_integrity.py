"""`verify` checks each chain against the goal row's record of where it ends;
`replay --fix` never loses an update that commits while it runs
(docs/integrity.md)."""

import hashlib
import json
from datetime import UTC

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.domain import RecordCheckpoint, iso
from ledger.eventstore import chain, projection, store, triggers
from ledger.eventstore.chain import canonical_json, canonical_text, event_hash, linked_hash
from ledger.models import Event, Goal
from tests.factories import GoalFactory, proof_of
from tests.helpers import ledger

pytestmark = pytest.mark.django_db


def tamper(sql: str, *params) -> None:
    """Raw SQL with the append-only triggers out of the way, as an attacker
    with database access would do. DDL is transactional: the test rolls back."""
    triggers.drop(connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, list(params))
    triggers.install(connection)


def db_pk(goal: Goal):
    return Goal._meta.pk.get_db_prep_value(goal.pk, connection)


def append_checkpoint(goal_id: str, step: str = "meanwhile") -> None:
    """What an agent's command does: one more event through the store."""
    state = store.load(goal_id)
    store.execute(goal_id, RecordCheckpoint(current_step=step, progress_pct=state.progress_pct,
                                            proof=proof_of(state)), actor="agent-1")


@pytest.fixture
def goals():
    return [GoalFactory(checkpoints=2), GoalFactory(checkpoints=5),
            GoalFactory(checkpoints=1, finish="completed")]


# ------------------------------------------------------------------ verify


def test_verify_reports_events_removed_from_the_end_of_a_chain(goals):
    victim = goals[1]
    version, head = victim.version, victim.last_hash
    tamper("DELETE FROM ledger_event WHERE goal_id = %s AND seq > %s", db_pk(victim),
           version - 2)

    code, out, err = ledger("verify")

    assert code == 1 and "1 broken chain(s)" in err
    assert (f"goal {victim.pk}: chain broken at seq {version - 1} (the goal row records "
            f"version {version} / head {head} but the chain ends at seq {version - 2})") in out
    assert out.count("chain broken") == 1
    # Every link left is sound: only the goal row knows the chain was longer.
    links = Event.objects.filter(goal=victim).order_by("seq").values_list(
        "seq", "kind", "data", "actor", "recorded_at", "prev_hash", "hash")
    assert chain.first_break(str(victim.pk), (chain.StoredLink(*r) for r in links))[0] is None


def test_verify_reports_a_goal_whose_events_were_all_removed(goals):
    victim = goals[0]
    tamper("DELETE FROM ledger_event WHERE goal_id = %s", db_pk(victim))
    code, out, _ = ledger("verify", str(victim.pk))
    assert code == 1 and f"goal {victim.pk}: chain broken at seq 1 (the goal has no events)" in out


def test_verify_reports_an_edited_event(goals):
    victim = goals[1]
    tamper("UPDATE ledger_event SET data = %s WHERE goal_id = %s AND seq = 4",
           '{"current_step": "forged", "progress_pct": 100}', db_pk(victim))
    code, out, _ = ledger("verify")
    assert code == 1
    assert f"goal {victim.pk}: chain broken at seq 4 (hash does not match the event's content)" \
        in out


def test_verify_reports_a_last_event_rewritten_with_a_recomputed_hash(goals):
    """A forger who recomputes the hash of the event they edit leaves every link
    sound when that event is the last one; the goal row's head gives it away."""
    victim = goals[1]
    last = Event.objects.get(goal=victim, seq=victim.version)
    data = {**last.data, "current_step": "forged"}
    forged = chain.event_hash(last.prev_hash, str(victim.pk), last.seq, last.kind, data,
                              last.actor, last.recorded_at)
    tamper("UPDATE ledger_event SET data = %s, hash = %s WHERE id = %s",
           connection.ops.adapt_json_value(data, None), forged, last.pk)

    code, out, _ = ledger("verify")

    assert code == 1
    assert (f"goal {victim.pk}: chain broken at seq {victim.version} (the event's hash is not "
            f"the goal row's head {victim.last_hash})") in out


def test_verify_reports_events_appended_behind_the_goal_rows_back(goals):
    """Inserting is not refused by the triggers; a well-chained event the goal
    row does not know about is still reported."""
    victim = goals[0]
    last = Event.objects.get(goal=victim, seq=victim.version)
    data, seq = {"current_step": "forged", "progress_pct": 100}, victim.version + 1
    Event.objects.create(
        goal=victim, seq=seq, kind="checkpoint.recorded", data=data, actor="mallory",
        recorded_at=last.recorded_at, prev_hash=last.hash,
        hash=chain.event_hash(last.hash, str(victim.pk), seq, "checkpoint.recorded", data,
                              "mallory", last.recorded_at))
    code, out, _ = ledger("verify", str(victim.pk))
    assert code == 1
    assert (f"goal {victim.pk}: chain broken at seq {seq} (the chain goes on to seq {seq} "
            f"past the goal row's version {victim.version})") in out


def test_verify_is_not_fooled_by_a_command_committing_while_it_reads(goals, monkeypatch):
    """The goal rows are read before their events: an append in between shows
    as events past the recorded version, which is checked again under the lock."""
    victim = goals[1]
    streamed = projection._grouped

    def append_then_stream(ids, *fields):
        append_checkpoint(str(victim.pk))
        yield from streamed(ids, *fields)

    monkeypatch.setattr(projection, "_grouped", append_then_stream)
    reports = {r.goal_id: r for r in projection.verify(projection.goal_ids())}
    assert not any(r.broken for r in reports.values())
    assert reports[str(victim.pk)].events == victim.version + 1


def test_verify_passes_intact_chains_and_counts_their_events(goals):
    code, out, _ = ledger("verify")
    assert code == 0
    assert f"verified 3 goal(s), {Event.objects.count()} event(s): 0 broken" in out


# ------------------------------------------------------------------ the admin


def auditor_client() -> Client:
    user = get_user_model().objects.create_user("audrey", password="x", is_staff=True)
    user.groups.add(Group.objects.get_or_create(name="auditor")[0])
    client = Client()
    client.force_login(user)
    return client


def test_the_admin_badge_and_full_verification_report_a_truncated_chain(goals):
    victim = goals[1]
    client = auditor_client()
    url = f"/admin/ledger/goal/{victim.pk}/timeline/"
    assert "chain verified (this page)" in client.get(url).content.decode()
    tamper("DELETE FROM ledger_event WHERE goal_id = %s AND seq = %s", db_pk(victim),
           victim.version)

    page = client.get(url).content.decode()
    assert f"chain broken at seq {victim.version}" in page
    full = client.get(url, {"verify": "all"}).content.decode()
    assert f"whole chain broken at seq {victim.version}" in full
    assert f"the chain ends at seq {victim.version - 1}" in full


def test_the_admin_badge_reports_a_rewritten_last_event(goals):
    victim = goals[0]
    last = Event.objects.get(goal=victim, seq=victim.version)
    data = {**last.data, "current_step": "forged"}
    forged = chain.event_hash(last.prev_hash, str(victim.pk), last.seq, last.kind, data,
                              last.actor, last.recorded_at)
    tamper("UPDATE ledger_event SET data = %s, hash = %s WHERE id = %s",
           connection.ops.adapt_json_value(data, None), forged, last.pk)
    page = auditor_client().get(f"/admin/ledger/goal/{victim.pk}/timeline/").content.decode()
    assert f"chain broken at seq {victim.version}" in page


# ------------------------------------------------------------------ replay --fix


def corrupt(goal: Goal) -> None:
    Goal.objects.filter(pk=goal.pk).update(status="done",
                                           state={**goal.state, "progress_pct": 99})


def test_replay_fix_never_writes_a_projection_folded_from_fewer_events(goals, monkeypatch):
    """A command commits between replay's fold and its rewrite: the rewrite is
    folded again under the goal's lock, so the stored version never goes back
    and the next command appends normally."""
    victim = goals[1]
    corrupt(victim)
    diff_goal, calls = projection.diff_goal, []

    def fold_then_let_a_command_commit(goal, events):
        result = diff_goal(goal, events)
        calls.append(goal.version)
        if len(calls) == 1:
            append_checkpoint(str(victim.pk))
        return result

    monkeypatch.setattr(projection, "diff_goal", fold_then_let_a_command_commit)
    [report] = projection.replay([str(victim.pk)], fix=True)

    assert report.fixed
    events = Event.objects.filter(goal=victim).count()
    assert events == victim.version + 1
    fixed = Goal.objects.get(pk=victim.pk)
    assert fixed.version == events
    assert fixed.last_hash == Event.objects.get(goal=victim, seq=events).hash
    assert fixed.status == "running" and fixed.state["current_step"] == "meanwhile"
    append_checkpoint(str(victim.pk), "later")  # would be a version_conflict
    assert Goal.objects.get(pk=victim.pk).version == events + 1
    monkeypatch.undo()
    assert list(projection.replay(projection.goal_ids())) == []


def test_replay_check_is_not_fooled_by_a_command_committing_while_it_reads(goals,
                                                                          monkeypatch):
    victim = goals[1]
    streamed = projection._grouped

    def append_then_stream(ids, *fields):
        append_checkpoint(str(victim.pk))
        yield from streamed(ids, *fields)

    monkeypatch.setattr(projection, "_grouped", append_then_stream)
    assert list(projection.replay(projection.goal_ids())) == []


def test_a_stored_state_leaves_its_defaults_out_and_replay_reads_either_form(goals):
    """The goal row stores only the fields that differ from their defaults
    (GoalState.to_stored): a row written in full by an older release is no
    difference, a key no field has is one, and --fix writes the short form."""
    goal = Goal.objects.get(pk=goals[0].pk)
    state = store.load(goal.pk)
    assert stored_keys(goal) == set(state.to_stored()) and "jobs" not in stored_keys(goal)
    assert goal.state == state.to_dict()  # read back whole (ledger.models.StateField)
    assert list(projection.replay([str(goal.pk)])) == []
    Goal.objects.filter(pk=goal.pk).update(state=state.to_dict())  # an older release's row
    assert list(projection.replay([str(goal.pk)])) == []
    Goal.objects.filter(pk=goal.pk).update(state={**state.to_stored(), "planted": 1})
    [report] = projection.replay([str(goal.pk)], fix=True)
    assert [d.field for d in report.differences] == ["state.planted"] and report.fixed
    assert stored_keys(goal) == set(state.to_stored())


def stored_keys(goal: Goal) -> set[str]:
    """The keys of the state's JSON as the database holds it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT state FROM ledger_goal WHERE id = %s", [db_pk(goal)])
        raw = cursor.fetchone()[0]
    return set(json.loads(raw) if isinstance(raw, str) else raw)


# ------------------------------------------------------- the chain's one definition

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children,
                                                                      max_size=4),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(data=st.dictionaries(st.text(), _JSON, max_size=5), goal=st.uuids(),
       seq=st.integers(min_value=1, max_value=2**40), kind=st.text(), actor=st.text(),
       at=st.datetimes(timezones=st.just(UTC)))
def test_the_hash_is_sha256_of_the_previous_hash_and_the_canonical_list(data, goal, seq, kind,
                                                                         actor, at):
    """The store hashes from the event's canonical data text (linked_hash);
    verify recomputes from the row (event_hash). Both must be the hash
    docs/design.md gives ("Event store"): sha256(prev_hash ||
    canonical_json([goal_id, seq, kind, data, actor, recorded_at])), byte for
    byte, for any data and any text."""
    prev = hashlib.sha256(str(seq).encode()).hexdigest()
    expected = hashlib.sha256(prev.encode("ascii") + canonical_json(
        [str(goal), seq, kind, data, actor, iso(at)])).hexdigest()
    assert event_hash(prev, str(goal), seq, kind, data, actor, at) == expected
    assert linked_hash(prev, str(goal), seq, kind, canonical_text(data), actor, at) == expected


def test_replay_of_an_event_this_release_cannot_read_says_so_plainly():
    """A database a development build wrote before the first release (or a
    row damaged by hand) holds an event of a shape no class reads: `ledger
    replay` stops with one line that names it, not a traceback."""
    victim = GoalFactory()
    tamper("UPDATE ledger_event SET data = %s WHERE goal_id = %s AND seq = 1",
           '{"objective": "an early shape"}', db_pk(victim))
    code, _out, err = ledger("replay")
    assert code == 1 and "replay stopped: stored goal.started data" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
