"""The chain hashes one spelling of a goal id, and time never runs backwards
in a goal."""

import io
import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django_q.models import Schedule

from ledger.domain import Heartbeat
from ledger.eventstore import clock as ledger_clock
from ledger.eventstore import store
from ledger.models import Event, Goal
from scheduling import watchdogs
from tests.factories import COMPLETED, EXTREME_INSTANTS, proof_of

pytestmark = pytest.mark.django_db


def spellings(gid: str) -> list[str]:
    value = uuid.UUID(gid)
    return [gid.upper(), value.hex, "{" + gid + "}", f"urn:uuid:{gid}"]


def test_any_spelling_of_a_goal_id_records_the_canonical_one(agent, clock):
    body = agent.start().json()
    gid = body["goal"]["id"]
    lease = {"token": body["lease"]["token"], "generation": body["lease"]["generation"]}
    for n, spelled in enumerate(spellings(gid)):
        beat = agent.post(f"goals/{spelled}/lease/heartbeat", {"lease": lease})
        assert beat.status_code == 200, (spelled, beat.json())
        step = agent.post(f"goals/{spelled}/checkpoints", {
            "lease": lease, "current_step": f"step {n}", "progress_pct": n})
        assert step.status_code == 201, (spelled, step.json())
    prepared = agent.post(f"goals/{gid.upper()}/watchdog", {"lease": lease})
    assert prepared.status_code == 200
    # The schedule's argument, hashed into every later wake, is canonical too.
    assert Schedule.objects.get(name=watchdogs.schedule_name(gid)).args == repr(gid)
    out = io.StringIO()
    call_command("ledger", "verify", stdout=out)  # exits non-zero on any break
    assert "0 broken" in out.getvalue() and "chain broken" not in out.getvalue()
    finished = agent.post(f"goals/urn:uuid:{gid}/finish", {"lease": lease,
                                                           **COMPLETED})
    assert finished.json()["completion_state"] == "completed"
    assert not Schedule.objects.filter(name__endswith=gid).exists()


def test_the_store_refuses_a_string_that_is_no_goal_id(clock):
    with pytest.raises(store.GoalNotFound):
        store.execute("not-a-uuid", Heartbeat(None), actor="x")


def test_a_host_whose_clock_is_behind_never_records_time_running_backwards(agent, clock):
    body = agent.start().json()
    gid = body["goal"]["id"]
    state = store.load(gid)
    last = Event.objects.filter(goal_id=gid).order_by("-seq").first().recorded_at
    # Another web or scheduler host whose clock is two minutes behind.
    skewed = ledger_clock.FrozenClock(clock() - timedelta(minutes=2))
    with ledger_clock.use(skewed):
        store.execute(gid, Heartbeat(proof_of(state)), actor="agent-1")
    times = list(Event.objects.filter(goal_id=gid).order_by("seq")
                 .values_list("recorded_at", flat=True))
    assert times == sorted(times) and times[-1] == last
    assert Goal.objects.get(pk=gid).updated_at == last


# ----------------------------------- instants at the edges of the calendar, invisible characters


@pytest.mark.parametrize("at", EXTREME_INSTANTS)
def test_a_wake_at_any_instant_is_a_problem_never_a_500(agent, clock, at):
    from api.problems import PROBLEM_CONTENT_TYPE as PROBLEM
    from tests.factories import start_goal

    gid, lease = start_goal(agent)
    for path, body in ((f"goals/{gid}/checkpoints",
                        {"current_step": "x", "progress_pct": 10, "release_lease": True}),
                       (f"goals/{gid}/lease/release", {})):
        answer = agent.post(path, {"lease": lease, **body,
                                   "wake": {"at": at, "reason": "scheduled_progress"}})
        assert answer.status_code == 400, answer.content
        assert answer["Content-Type"] == PROBLEM
        assert answer.json()["code"] == "time_out_of_range", answer.json()


def test_every_instant_the_ledger_formats_parses_back():
    from datetime import UTC, datetime

    from ledger.domain.events import iso

    for moment in (datetime(1, 1, 1, tzinfo=UTC), datetime(999, 6, 1, 12, tzinfo=UTC),
                   datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)):
        assert datetime.fromisoformat(iso(moment)) == moment
    assert iso(datetime(1, 1, 1, tzinfo=UTC)) == "0001-01-01T00:00:00.000000Z"


def test_a_zero_width_character_in_a_workspace_is_the_same_workspace(agent, clock):
    first = agent.start(workspace="/srv/repos/zw")
    assert first.status_code == 201
    again = agent.start(goal_key="issue-2", workspace="/srv/repos/\u200bzw")
    assert again.status_code == 409 and again.json()["code"] == "workspace_bound", again.json()
    same = agent.start(workspace="/srv/re\u2060pos/zw\ufeff")
    assert same.status_code == 200 and same.json()["goal"]["id"] == first.json()["goal"]["id"]
