"""The host continued the session by itself (POST goals/{id}/continuations,
ledger.services.continuations): one continuation per reset on the real store,
SQLite and PostgreSQL, whoever comes first, including a real race of the
reset's wake against the host's hook under the goal's lock."""

import threading
from datetime import timedelta

import pytest
from django.db import connections
from django_q.models import Schedule

from ledger.models import Event, Goal
from ledger.services import wakes
from scheduling import watchdogs
from scheduling.models import Dispatch
from tests.factories import lease_of

DISPATCHERS = {"cmd": {"type": "command", "argv": ["true"]}}


def kinds_of(gid: str) -> list[str]:
    return list(Event.objects.filter(goal_id=gid).order_by("seq").values_list("kind", flat=True))


def paused_goal(agent, settings, **policy) -> tuple[str, str]:
    """A goal whose run met a usage limit (Retry-After 120 s, no margin): its
    id and the reset's wake's intended run time."""
    settings.WAKELEDGER_DISPATCHERS = DISPATCHERS
    settings.WAKELEDGER_RESET_MARGIN_SECONDS = 0
    body = agent.start(goal_key=f"k-{Goal.objects.count()}",
                       workspace=f"/srv/repos/w-{Goal.objects.count()}",
                       policy={"lease_seconds": 300, "dispatch": "cmd", **policy},
                       session={"session_key": f"s-{Goal.objects.count()}"}).json()
    gid, lease = body["goal"]["id"], lease_of(body)
    answer = agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                             "error_text": "rate limit exceeded",
                                             "retry_after": "120"})
    assert answer.status_code == 200, answer.json()
    assert answer.json()["status"] == "paused"
    due = Schedule.objects.get(name=watchdogs.reset_schedule_name(gid)).next_run
    return gid, due.isoformat()


def host_continues(agent, gid: str, trigger: str = "session_start"):
    return agent.post(f"goals/{gid}/continuations", {"host": "claude-code", "trigger": trigger})


def test_the_host_continuing_after_the_reset_is_the_one_and_the_wake_stands_down(
        agent, clock, settings):
    gid, due = paused_goal(agent, settings)
    clock.advance(seconds=121)
    answer = host_continues(agent, gid)
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert body["outcome"] == "host_continued" and body["acquired"] is True
    assert body["lease"]["token"] and body["continued_by"] == "host"
    # The reset's row is gone with the pause; a claim its fire left queued stands down.
    assert not Schedule.objects.filter(name=watchdogs.reset_schedule_name(gid)).exists()
    fired = wakes.fire(gid, due, "reset")
    assert fired.outcome == "stood_down" and fired.lease is None
    assert Dispatch.objects.filter(goal_id=gid).count() == 0
    kinds = kinds_of(gid)
    assert kinds.count("continuation.host_made") == 1
    assert kinds.count("continuation.charged") == 1
    assert Goal.objects.get(pk=gid).state["lease"]["via"] == "host"


def test_a_host_continuing_after_the_wake_is_told_to_stand_down_and_recorded(
        agent, clock, settings):
    gid, due = paused_goal(agent, settings)
    clock.advance(seconds=121)
    fired = wakes.fire(gid, due, "reset")
    assert fired.outcome == "recurring_acquired"
    answer = host_continues(agent, gid, "prompt").json()
    assert answer["outcome"] == "stood_down" and answer["continued_by"] == "wake"
    assert "lease" not in answer or not answer.get("lease")
    assert kinds_of(gid).count("continuation.stood_down") == 1
    assert Goal.objects.get(pk=gid).state["lease"]["via"] == "wake"


def test_a_continuation_before_the_reset_or_without_one_records_nothing(
        agent, clock, settings):
    gid, _ = paused_goal(agent, settings)
    before = kinds_of(gid)
    answer = host_continues(agent, gid).json()
    assert answer["outcome"] == "not_a_reset" and answer["retry_after_seconds"] == 120
    assert kinds_of(gid) == before


def test_bad_input_is_a_clear_refusal(agent, clock, settings):
    gid, _ = paused_goal(agent, settings)
    bad = agent.post(f"goals/{gid}/continuations", {"host": "claude-code", "trigger": "cron"})
    assert bad.status_code == 400
    other = agent.post(f"goals/{gid}/continuations",
                       {"host": "claude-code", "trigger": "prompt", "session_key": "other"})
    assert other.status_code == 409 and other.json()["code"] == "session_mismatch"
    extra = agent.post(f"goals/{gid}/continuations",
                       {"host": "claude-code", "trigger": "prompt", "lease": {}})
    assert extra.status_code == 400


def test_a_host_known_to_continue_is_given_its_grace_before_the_wake(agent, clock, settings):
    _, due = paused_goal(agent, settings, host_continues=True, host_grace_minutes=7)
    assert due.startswith((clock() + timedelta(seconds=120 + 7 * 60)).isoformat()[:19])


@pytest.mark.django_db(transaction=True)
def test_the_wake_racing_the_hosts_own_continuation_ends_with_one(clock, settings):
    """Both at the same moment, released by a barrier, each in its own
    connection: the goal's lock decides; the loser stands down, recorded."""
    from tests.conftest import Api

    agent = Api("agent-1", "agent")
    for _ in range(5):
        gid, due = paused_goal(agent, settings)
        clock.advance(seconds=121)
        barrier, results = threading.Barrier(2), {}

        def run(name, work, barrier=barrier, results=results):
            try:
                barrier.wait()
                results[name] = work()
            except BaseException as error:  # pragma: no cover - reported below
                results[name] = error
            finally:
                connections.close_all()

        racers = [threading.Thread(target=run, args=("wake", lambda g=gid, d=due:
                                                     wakes.fire(g, d, "reset").outcome)),
                  threading.Thread(target=run, args=("host", lambda g=gid:
                                                     host_continues(agent, g).json()["outcome"]))]
        for thread in racers:
            thread.start()
        for thread in racers:
            thread.join()
        assert sorted(results.values()) in (["host_continued", "stood_down"],
                                             ["recurring_acquired", "stood_down"]), results
        kinds = kinds_of(gid)
        assert kinds.count("continuation.charged") == 1
        granted = kinds.count("lease.acquired") + kinds.count("lease.taken_over")
        assert granted == 2  # the start's lease, then the reset's one continuation
        clock.advance(hours=1)


def test_resume_policy_ask_waits_for_a_persons_approval_through_the_approval_path(
        agent, operator, clock, settings):
    gid, due = paused_goal(agent, settings, resume="ask")
    clock.advance(seconds=121)
    asked = wakes.fire(gid, due, "reset")
    assert asked.outcome == "approval_required" and asked.lease is None
    goal = agent.get(f"goals/{gid}").json()
    assert (goal["status"], goal["reason"]) == ("blocked", "BLOCKED_APPROVAL")
    assert [a["id"] for a in operator.get("alerts").json()["results"]] == [gid]
    # The host went on anyway before anyone approved: recorded, no lease, told.
    down = host_continues(agent, gid, "prompt").json()
    assert down["outcome"] == "stood_down" and down["breaks_policy"] == "ask"
    resolved = operator.post(f"goals/{gid}/approvals/resume/resolve", {"decision": "approve"})
    assert resolved.status_code == 200, resolved.json()
    row = Schedule.objects.get(name=watchdogs.reset_schedule_name(gid))
    assert row.next_run == clock()
    assert wakes.fire(gid, row.next_run.isoformat(), "reset").outcome == "recurring_acquired"


def test_a_host_continuing_inside_quiet_hours_is_recorded_and_listed_for_a_person(
        agent, operator, clock, settings):
    # The frozen clock reads 09:00 UTC: quiet from 08:00 to 12:00.
    quiet = {"start": "08:00", "end": "12:00", "timezone": "UTC"}
    gid, due = paused_goal(agent, settings, resume="quiet_hours", quiet_hours=quiet)
    assert due.startswith("2026-12-02T12:00:00")  # the wake waits for the window's end
    clock.advance(seconds=121)
    answer = host_continues(agent, gid).json()
    assert answer["outcome"] == "host_continued" and answer["breaks_policy"] == "quiet_hours"
    alerts = operator.get("alerts").json()["results"]
    assert [(a["id"], a["reason"]) for a in alerts] == [(gid, "CONTINUED_AGAINST_POLICY")]
    made = Event.objects.get(goal_id=gid, kind="continuation.host_made")
    assert made.data["breaks_policy"] == "quiet_hours"


def test_a_bad_resume_policy_is_refused_with_its_field(agent, clock):
    for policy, field in (({"resume": "later"}, "policy.resume"),
                          ({"resume": "quiet_hours"}, "policy.quiet_hours"),
                          ({"resume": "quiet_hours",
                            "quiet_hours": {"start": "25:00", "end": "07:00"}},
                           "policy.quiet_hours.start"),
                          ({"host_grace_minutes": 0}, "policy.host_grace_minutes")):
        refused = agent.start(policy=policy)
        assert refused.status_code == 400, (policy, refused.json())
        assert Goal.objects.count() == 0
        assert field in str(refused.json()), refused.json()
