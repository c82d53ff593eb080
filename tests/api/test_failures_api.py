"""Run reports, the continuation budget, approvals and operators through the API
and the scheduler's tasks."""

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django_q.models import Schedule

from ledger.domain.runs import backoff
from ledger.models import Event, Goal
from ledger.services import alerts
from ledger.services import wakes as claims
from scheduling import tasks, watchdogs
from tests.factories import lease_of

pytestmark = pytest.mark.django_db

CLAUDE_LIMIT = "Claude usage limit reached. Your limit will reset at 8am (Europe/Istanbul)."



@pytest.fixture
def started(agent, clock):
    def start(**policy):
        body = agent.start(policy={"lease_seconds": 300, **policy},
                           session={"session_id": "s-1", "model": "opus"}).json()
        return body["goal"]["id"], lease_of(body)

    return start


def resume(gid: str, occurrence: str) -> dict:
    """The reset wake fires; the continuation's lease, as a push dispatcher would
    hand it (pull wakes: tests/scheduling/test_liveness.py)."""
    result = claims.claim(gid, source="internal", occurrence_id=occurrence, actor="scheduler",
                          kind="reset", push=True)
    assert result.outcome == "recurring_acquired", result.report
    return {"token": result.lease.token, "generation": result.lease.generation}


def report(agent, gid, lease, key=None, **body):
    response = agent.post(f"goals/{gid}/runs", {"lease": lease, **body}, key=key)
    assert response.status_code == 200, response.json()
    return response.json()


def test_a_rate_limit_pauses_until_the_reset_plus_two_minutes(agent, started, clock):
    gid, lease = started()
    answer = report(agent, gid, lease, outcome="error", error_text=CLAUDE_LIMIT)
    # 09:00 UTC is 12:00 in Istanbul: the next 8am there is tomorrow 05:00 UTC.
    assert answer["classification"] == "rate_limit"
    assert answer["reset_at"] == "2026-12-03T05:00:00.000000Z"
    assert answer["paused_until"] == "2026-12-03T05:02:00.000000Z"
    assert answer["status"] == "paused"
    assert answer["next_wake_at"] == "2026-12-03T05:02:00.000000Z"
    [one_off] = Schedule.objects.filter(name=watchdogs.reset_schedule_name(gid))
    assert one_off.schedule_type == Schedule.ONCE
    goal = Goal.objects.get(pk=gid)
    assert goal.paused_until == clock() + timedelta(hours=20, minutes=2)
    # Paused: the lease is gone, a new one waits for the reset, a wake is early.
    refused = agent.post(f"goals/{gid}/lease").json()
    assert refused["acquired"] is False and refused["next_required_action"] == "wait_for_reset"
    assert tasks.fire_watchdog(gid, intended_date="early") == "not_due"
    clock.advance(hours=20, minutes=3)
    new = resume(gid, "reset-1")
    wake = Event.objects.filter(goal_id=gid, kind="wake.claimed").last()
    assert wake.data["reason"] == "rate_limit_reset"
    assert new["generation"] == 2


def test_retry_after_header_and_backoff_without_a_reset(agent, started, clock):
    gid, lease = started(max_continuations=10)
    answer = report(agent, gid, lease, outcome="error", error_text="HTTP 429 Too Many Requests",
                    retry_after="120")
    assert answer["reset_at"] == "2026-12-02T09:02:00.000000Z"
    assert answer["paused_until"] == "2026-12-02T09:04:00.000000Z"
    # A per-minute request limit (no usage window named): minutes, bounded.
    waits = []
    for n in range(4):
        clock.advance(days=2)
        lease = resume(gid, f"o-{n}")
        answer = report(agent, gid, lease, outcome="error", error_text="rate limit exceeded")
        waits.append(Goal.objects.get(pk=gid).paused_until - clock())
    assert [w.total_seconds() / 60 for w in waits] == [2, 4, 8, 15]
    assert [backoff(n).total_seconds() / 3600 for n in (0, 1, 5, 6, 12)] == \
        [0.5, 1, 16, 24, 24]


def test_a_usage_window_without_a_reset_backs_off_in_hours(agent, started, clock):
    """Codex's "try again later" with the reset only in a header: a usage
    window, so the long backoff, not the per-minute one."""
    gid, lease = started(max_continuations=10)
    report(agent, gid, lease, outcome="error",
           error_text="You've hit your usage limit. Upgrade to Pro or try again later.")
    goal = Goal.objects.get(pk=gid)
    assert goal.paused_until - clock() == timedelta(minutes=30)
    paused = Event.objects.filter(goal_id=gid, kind="goal.paused").last()
    assert paused.data["basis"] == "backoff 30 min"


def test_a_request_too_large_for_the_limit_blocks_for_a_human(agent, started):
    gid, lease = started()
    answer = report(agent, gid, lease, outcome="error", error_text=(
        "429 Request too large for gpt-4o in organization org-x on tokens per min (TPM): "
        "Limit 30000, Requested 61337. The input or output tokens must be reduced in order "
        "to run successfully."))
    assert (answer["classification"], answer["status"], answer["reason"]) == \
        ("request_too_large", "blocked", "REQUEST_TOO_LARGE")
    assert "61337" not in json.dumps(list(Event.objects.values_list("data", flat=True)))


@pytest.mark.parametrize("text, status, reason", [
    ("Error: OAuth token has expired. Please run /login", "failed", "AUTH_FAILED"),
    ("Your organization must be verified to use the model gpt-5", "failed",
     "OWNER_VERIFICATION"),
    ("segmentation fault (core dumped)", "blocked", "UNCLASSIFIED"),
])
def test_other_classes(agent, started, text, status, reason):
    gid, lease = started()
    answer = report(agent, gid, lease, outcome="error", error_text=text)
    assert (answer["status"], answer["reason"]) == (status, reason)
    assert tasks.fire_watchdog(gid, intended_date="later") in ("terminal_noop",)


def test_a_changed_session_blocks_the_goal(agent, started):
    gid, lease = started()
    answer = report(agent, gid, lease, outcome="ok", session={"model": "sonnet"})
    assert (answer["status"], answer["reason"]) == ("blocked", "SESSION_CHANGED")


def test_the_fourth_rate_limit_with_a_budget_of_three_stops_the_goal(agent, started, clock):
    gid, lease = started(max_continuations=3)
    for n in range(3):
        answer = report(agent, gid, lease, outcome="error", error_text="429 rate limit")
        assert answer["status"] == "paused"
        clock.advance(days=2)
        lease = resume(gid, f"r-{n}")
        assert Goal.objects.get(pk=gid).state["continuations_used"] == n + 1
    answer = report(agent, gid, lease, outcome="error", error_text="429 rate limit")
    assert (answer["status"], answer["reason"]) == ("blocked", "RATE_LIMIT_STOPPED")
    assert answer["continuations"] == {"used": 3, "max": 3}
    charges = Event.objects.filter(goal_id=gid, kind="continuation.charged")
    assert [e.data["attempt"] for e in charges.order_by("seq")] == [1, 2, 3]


def test_a_crash_after_the_charge_gets_no_free_retry(agent, started, clock):
    gid, lease = started(max_continuations=1)
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    report(agent, gid, lease, outcome="error", error_text="rate limited", retry_after="60")
    clock.advance(minutes=10)
    # The claim commits (charged, lease granted) and the process dies before
    # dispatching: nobody ever uses the lease.
    claims.claim(gid, source="internal", occurrence_id="o-1", actor="scheduler", kind="reset",
                 push=True)
    assert Goal.objects.get(pk=gid).state["continuations_used"] == 1
    clock.advance(minutes=10)
    tasks.sweep_leases()
    goal = Goal.objects.get(pk=gid)
    assert (goal.status, goal.reason) == ("blocked", "INTERRUPTED_UNKNOWN")
    assert goal.state["continuations_used"] == 1  # not refunded
    # Blocking removed its watchdog: nothing fires at a goal that needs a human.
    assert not Schedule.objects.filter(name=watchdogs.schedule_name(gid)).exists()
    clock.advance(hours=1)
    assert tasks.fire_watchdog(gid, intended_date="o-2") == "terminal_noop"


def test_no_automatic_path_crosses_an_approval_gate(agent, operator, started, clock):
    gid, lease = started()
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    gated = agent.post(f"goals/{gid}/approvals", {"lease": lease, "gate": "deploy-prod",
                                                  "summary": "ship v2"}).json()
    assert (gated["status"], gated["reason"]) == ("blocked", "BLOCKED_APPROVAL")
    assert gated["pending_approvals"][0]["gate"] == "deploy-prod"
    clock.advance(hours=3)
    assert tasks.sweep_leases() == 0
    assert agent.post(f"goals/{gid}/lease").json()["code"] == "goal_blocked"
    assert agent.start().json()["acquired"] is False
    assert tasks.fire_watchdog(gid, intended_date="x") == "terminal_noop"
    assert Goal.objects.get(pk=gid).reason == "BLOCKED_APPROVAL"
    assert not Schedule.objects.filter(name=watchdogs.schedule_name(gid)).exists()
    refused = operator.post(f"goals/{gid}/recover", {"reason": "try"})
    assert refused.status_code == 409 and refused.json()["code"] == "not_recoverable"
    approved = operator.post(f"goals/{gid}/approvals/deploy-prod/resolve",
                             {"decision": "approve", "note": "go"}).json()
    assert approved["status"] == "waiting" and approved["pending_approvals"] == []
    # Liveness: the approval re-arms its watchdog, due at once.
    [schedule] = Schedule.objects.filter(name=watchdogs.schedule_name(gid))
    assert schedule.next_run == clock() and approved["next_wake_at"]
    resolved = Event.objects.get(goal_id=gid, kind="approval.resolved")
    assert resolved.actor == "operator-1" and resolved.data["operator"] == "operator-1"
    assert agent.post(f"goals/{gid}/lease").json()["acquired"] is True


def test_a_rejected_gate_closes_the_goal(agent, operator, started):
    gid, lease = started()
    agent.post(f"goals/{gid}/approvals", {"lease": lease, "gate": "delete-db"})
    rejected = operator.post(f"goals/{gid}/approvals/delete-db/resolve",
                             {"decision": "reject", "note": "never"}).json()
    assert (rejected["status"], rejected["reason"]) == ("failed", "APPROVAL_REJECTED")


def test_stop_is_permanent_and_recover_starts_a_new_budget(agent, operator, started, clock):
    gid, lease = started(max_continuations=1)
    report(agent, gid, lease, outcome="error", error_text="error 429", retry_after="1")
    clock.advance(minutes=5)
    lease = resume(gid, "o-1")
    stopped = report(agent, gid, lease, outcome="error", error_text="error 429")
    assert stopped["reason"] == "RATE_LIMIT_STOPPED"
    recovered = operator.post(f"goals/{gid}/recover", {"reason": "quota raised"}).json()
    assert (recovered["status"], recovered["continuations_used"]) == ("waiting", 0)
    event = Event.objects.get(goal_id=gid, kind="goal.recovered")
    assert event.actor == "operator-1"
    assert event.data["reason"] == "quota raised" and event.data["from_reason"] == \
        "RATE_LIMIT_STOPPED"
    halted = operator.post(f"goals/{gid}/stop", {"reason": "wrong repository"}).json()
    assert halted["status"] == "stopped"
    assert operator.post(f"goals/{gid}/recover", {"reason": "x"}).status_code == 409
    assert operator.post(f"goals/{gid}/stop", {"reason": "x"}).json()["code"] == \
        "goal_terminal"


def test_alerts_and_the_operator_commands(agent, operator, started, clock):
    gid, lease = started()
    agent.post(f"goals/{gid}/approvals", {"lease": lease, "gate": "merge"})
    page = operator.get("alerts").json()
    [alert] = page["results"]
    assert page["count"] == 1
    assert alert["id"] == gid and alert["reason"] == "BLOCKED_APPROVAL"
    out = io.StringIO()
    with pytest.raises(CommandError) as failed:  # exit 1: a cron job or CI check can page
        call_command("ledger", "alerts", stdout=out)
    assert failed.value.returncode == 1
    assert gid in out.getvalue() and "1 goal(s) need a human" in out.getvalue()
    assert "scheduler never_ran" in out.getvalue()
    with pytest.raises(CommandError, match="not_recoverable"):
        call_command("ledger", "recover", gid, "--reason", "x", "--operator", "bob")
    call_command("ledger", "approve", gid, "merge", "--operator", "bob", stdout=io.StringIO())
    assert Event.objects.filter(goal_id=gid, kind="approval.resolved").get().actor == "bob"
    call_command("ledger", "stop", gid, "--reason", "done with it", "--operator", "bob",
                 stdout=io.StringIO())
    stop = Event.objects.get(goal_id=gid, kind="goal.stopped")
    assert (stop.actor, stop.data["reason"]) == ("bob", "done with it")
    assert operator.get("alerts").json() == {"count": 0, "next": None, "previous": None,
                                             "results": []}
    alerts.beat()  # a scheduler sweeps: nothing needs a human, exit 0
    out = io.StringIO()
    call_command("ledger", "alerts", stdout=out)
    assert "0 goal(s) need a human" in out.getvalue()


def test_no_error_text_reaches_the_database(agent, started, clock):
    gid, lease = started(max_continuations=5)
    secret_text = ("Rate limit reached for org-SECRETORG99 on requests per min. "
                   "Please try again in 9.8s. request_id=req_UNIQUE123XYZ")
    report(agent, gid, lease, outcome="error", error_text=secret_text, key="run-1")
    with connection.cursor() as cursor:
        dump = []
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            dump.extend(repr(row) for row in cursor.fetchall())
    dump = "\n".join(dump)
    for fragment in ("SECRETORG99", "req_UNIQUE123XYZ", "Please try again"):
        assert fragment not in dump
    run = Event.objects.get(goal_id=gid, kind="run.reported")
    assert run.data == {"outcome": "error", "class": "rate_limit",
                        "reset_at": "2026-12-02T09:00:09.800000Z", "retry_after": ""}


# --- resets far in the future, and Retry-After values that are no Retry-After ---------------

HORIZON = timedelta(days=7)  # ledger.domain.resets.RESET_HORIZON, written out: the contract


def at_iso(moment) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.mark.parametrize("retry_after", [
    "9999-12-31T23:59:59Z",  # was a 500: an overflow adding the margin in the domain
    "Wed, 21 Oct 9999 07:28:00 GMT",  # was a pause until the year 9999
    "9999-12-31T23:59:59-05:00",  # beyond datetime.max once in UTC
    "99999999999999999999",  # delta-seconds, valid syntax, absurd value
    "Fri, 21 Oct 2033 07:28:00 GMT",  # plausible syntax, seven years away
])
def test_a_reset_beyond_the_horizon_pauses_until_the_horizon(agent, started, clock,
                                                              retry_after):
    gid, lease = started()
    answer = report(agent, gid, lease, outcome="error", error_text="HTTP 429 Too Many Requests",
                    retry_after=retry_after)
    assert answer["status"] == "paused"
    assert answer["reset_at"] == at_iso(clock() + HORIZON)
    assert answer["paused_until"] == at_iso(clock() + HORIZON + timedelta(minutes=2))
    assert answer["next_wake_at"] == answer["paused_until"]
    assert Goal.objects.get(pk=gid).paused_until == clock() + HORIZON + timedelta(minutes=2)
    # The goal wakes at the horizon, finds the limit still there, and pauses again.
    clock.advance(days=7, minutes=3)
    lease = resume(gid, "horizon-1")
    again = report(agent, gid, lease, outcome="error", error_text="HTTP 429 Too Many Requests",
                   retry_after=retry_after)
    assert again["paused_until"] == at_iso(clock() + HORIZON + timedelta(minutes=2))


@pytest.mark.parametrize("error_text", [
    # Claude Code 2.1.163, anthropics/claude-code#65802: next June 7th, half a year away.
    "You've hit your weekly limit · resets Jun 7, 4pm (Europe/Rome)",
    # VS Code Copilot, microsoft/vscode-copilot-release#6479: 24 days.
    "Sorry, your request was rate-limited. Please wait 587 hours 33 minutes before trying "
    "again.",
])
def test_a_reset_the_text_states_beyond_the_horizon_is_the_horizon(agent, started, clock,
                                                                   error_text):
    gid, lease = started()
    answer = report(agent, gid, lease, outcome="error", error_text=error_text)
    assert answer["classification"] == "rate_limit"
    assert answer["reset_at"] == at_iso(clock() + HORIZON)


@pytest.mark.parametrize("retry_after", [
    "soon",
    "-5",  # delta-seconds are never negative
    "1e3",
    "2026-12-03T10:00:00",  # ISO 8601 without an offset: whose 10:00?
    "Wed, 32 Oct 2026 07:28:00 GMT",
    "120 seconds",  # a unit is no part of delta-seconds
])
def test_a_retry_after_that_is_no_retry_after_value_is_a_400(agent, started, retry_after):
    gid, lease = started()
    response = agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                                "error_text": "429 Too Many Requests",
                                                "retry_after": retry_after})
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["code"] == "validation_error"
    assert "Retry-After" in body["errors"]["retry_after"][0]
    assert Goal.objects.get(pk=gid).status == "running"  # nothing was recorded


def test_a_retry_after_alone_is_a_rate_limit_until_then(agent, started, clock):
    gid, lease = started()
    answer = report(agent, gid, lease, outcome="error", retry_after="600")
    assert answer["classification"] == "rate_limit"
    assert answer["reset_at"] == at_iso(clock() + timedelta(minutes=10))
    assert answer["status"] == "paused"
    assert answer["paused_until"] == at_iso(clock() + timedelta(minutes=12))


@pytest.mark.parametrize("text", [None, "", " \n "])
def test_an_error_with_neither_text_nor_retry_after_is_a_400(agent, started, clock, text):
    """Was a silent block as UNCLASSIFIED: nothing to classify is a bad report."""
    gid, lease = started()
    body = {"lease": lease, "outcome": "error",
            **({"error_text": text} if text is not None else {})}
    response = agent.post(f"goals/{gid}/runs", body)
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "validation_error"
    assert "error_text" in response.json()["errors"]
    assert Goal.objects.get(pk=gid).status == "running"
    assert not Event.objects.filter(goal_id=gid, kind="run.reported").exists()


def test_a_blank_retry_after_is_no_retry_after(agent, started, clock):
    gid, lease = started()
    answer = report(agent, gid, lease, outcome="error", error_text="429 Too Many Requests",
                    retry_after="   ")
    # No reset named anywhere, nor a usage window: the first request-rate step, 1 minute.
    assert answer["paused_until"] == at_iso(clock() + timedelta(minutes=1))


# --------------------------------------------------------- a rate-limited pause, said everywhere


def test_a_paused_goal_says_why_everywhere_until_the_pause_ends(agent, clock):
    import io

    from django.core.management import call_command

    from tests.factories import start_goal
    from tests.helpers import staff

    gid, lease = start_goal(agent)
    answer = agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                              "error_text": "429 rate limit exceeded",
                                              "retry_after": "120"})
    assert answer.json()["status"] == "paused" and answer.json()["reason"] == "RATE_LIMITED"
    assert agent.get(f"goals/{gid}").json()["reason"] == "RATE_LIMITED"
    assert [g["id"] for g in agent.get("goals", reason="RATE_LIMITED").json()["results"]] == [gid]
    assert Goal.objects.get(pk=gid).reason == "RATE_LIMITED"
    listed = staff("auditor-24", "auditor").get("/admin/ledger/goal/").content.decode()
    assert "RATE_LIMITED" in listed
    out = io.StringIO()
    call_command("ledger", "goals", stdout=out)
    assert "RATE_LIMITED" in out.getvalue()
    # The pause is over once the goal is leased again: so is its reason.
    clock.advance(seconds=3600)
    taken = agent.post(f"goals/{gid}/lease")
    assert taken.json()["acquired"], taken.json()
    body = agent.get(f"goals/{gid}").json()
    assert (body["status"], body["reason"]) == ("running", "")


def test_release_after_a_rate_limit_says_the_lease_is_gone_and_until_when(agent, clock):
    from tests.factories import start_goal

    gid, lease = start_goal(agent)
    paused = agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                              "error_text": "429 rate limit exceeded",
                                              "retry_after": "600"}).json()
    answer = agent.post(f"goals/{gid}/lease/release", {"lease": lease})
    assert answer.status_code == 409 and answer.json()["code"] == "lease_lost"
    detail = answer.json()["detail"]
    assert "acquire one" not in detail
    assert "released" in detail and paused["paused_until"] in detail
    assert answer.json()["paused_until"] == paused["paused_until"]
