"""Lists are truthful (docs/liveness.md): with more goals
needing a human than any one page shows, GET /alerts, `ledger alerts`,
`ledger doctor` and the dashboard count every one with SQL and show every one
or say how many they did not show — the oldest goals no longer vanish at 500.
Also: the sweeper's heartbeat is written only by a sweep that completed, the
scheduler's own rows are checked by their next run, and "the reset wake" is
said only of a paused goal's reset wake.
"""

import io
import re
import uuid
from datetime import timedelta
from unittest import mock

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from django_q.models import Schedule

from ledger.domain import housekeeping
from ledger.eventstore import tallies
from ledger.models import Goal, SchedulerBeat
from ledger.operators import doctor
from ledger.services import alerts
from scheduling import tasks
from tests.factories import GoalFactory
from tests.operators.test_admin import blocked_goal, staff

pytestmark = pytest.mark.django_db

MANY = 521  # more than the 500 the old lists stopped at


def clones(template: Goal, n: int, *, oldest_first_by: timedelta = timedelta(days=30),
           **columns) -> list[Goal]:
    """``n`` copies of a real goal's projection, each older than the last
    (the first is the oldest), bulk-created: the lists read only the goal
    rows, and 500 goals started through the store would take a minute."""
    rows = []
    for i in range(n):
        pk = uuid.uuid4()
        at = template.created_at - oldest_first_by + timedelta(seconds=i)
        state = {**template.state, "goal_id": str(pk), "goal_key": f"clone-{i}",
                 "workspace": f"/srv/clone-{i}", "created_at": at.isoformat(),
                 "updated_at": at.isoformat()}
        fields = {f.attname: getattr(template, f.attname) for f in Goal._meta.concrete_fields}
        fields.update(id=pk, goal_key=f"clone-{i}", workspace=f"/srv/clone-{i}",
                      created_at=at, updated_at=at, state=state, **columns)
        rows.append(Goal(**fields))
    created = Goal.objects.bulk_create(rows, batch_size=250)
    # Rows written past the store: counted into the goals-by-status tallies
    # as migration 0017 counts existing goals (else the doctor reports drift).
    tallies.recount()
    return created


@pytest.fixture
def many_blocked(clock) -> list[Goal]:
    """MANY blocked goals (UNCLASSIFIED), oldest first, plus the real one."""
    template = blocked_goal()
    return [*clones(template, MANY - 1), template]


def walk(api, page_size: int | None = None) -> tuple[list[dict], list[int]]:
    """Every row GET /alerts pages out, following next; and each page's count."""
    rows, counts = [], []
    params = {"page_size": page_size} if page_size else {}
    response = api.get("alerts", **params)
    while True:
        assert response.status_code == 200, response.content
        body = response.json()
        rows += body["results"]
        counts.append(body["count"])
        if not body["next"]:
            return rows, counts
        response = api.client.get(body["next"])


# ------------------------------------------------------------------ GET /alerts


def test_alerts_pages_reach_every_goal_oldest_first_with_an_sql_count(many_blocked, operator):
    first = operator.get("alerts").json()
    assert first["count"] == MANY and len(first["results"]) == 50  # GET /goals' default
    assert first["previous"] is None and first["next"]
    # The goal a human has waited longest for comes first, not last (or never).
    assert first["results"][0]["id"] == str(many_blocked[0].pk)
    assert first["results"][0]["reason"] == "UNCLASSIFIED"
    rows, counts = walk(operator, page_size=200)
    assert [row["id"] for row in rows] == [str(goal.pk) for goal in many_blocked]
    assert counts == [MANY] * 3
    # The row fields are the same as before.
    assert set(rows[0]) == {"id", "goal_key", "workspace", "agent", "status", "reason", "why",
                            "since", "expected"}


def test_a_cursor_skips_and_repeats_nothing_while_goals_move(many_blocked, operator):
    page = operator.get("alerts", page_size=200).json()
    seen = [row["id"] for row in page["results"]]
    # Goals change while the operator reads: with the old -updated_at order
    # the moved ones jumped to the front and the cursor lost its place.
    moved = many_blocked[100:110] + many_blocked[300:310]
    Goal.objects.filter(pk__in=[g.pk for g in moved]).update(updated_at=timezone.now())
    while page["next"]:
        page = operator.client.get(page["next"]).json()
        seen += [row["id"] for row in page["results"]]
    assert sorted(seen) == sorted(str(goal.pk) for goal in many_blocked)
    assert len(seen) == len(set(seen)) == MANY


def test_a_row_the_query_matched_is_listed_so_the_count_and_the_rows_agree(clock, operator):
    template = blocked_goal()
    # A projection whose indexed column says HOST_SILENT while its state says
    # nothing (replay --check reports it): the query lists it, so the page does.
    [drifted] = clones(template, 1, status="stopped", reason="", attention="HOST_SILENT")
    Goal.objects.filter(pk=drifted.pk).update(
        state={**drifted.state, "status": "stopped", "reason": ""})
    page = operator.get("alerts").json()
    assert page["count"] == 2 == len(page["results"])
    assert {row["id"]: row["reason"] for row in page["results"]} == {
        str(drifted.pk): "HOST_SILENT", str(template.pk): "UNCLASSIFIED"}
    assert alerts.count(Goal.objects.all()) == len(alerts.alerts(Goal.objects.all())) == 2


def test_an_agent_counts_and_pages_only_its_own_goals(many_blocked, agent, other_agent):
    assert agent.get("alerts", page_size=1).json()["count"] == MANY  # agent-1's goals
    assert other_agent.get("alerts").json() == {"count": 0, "next": None, "previous": None,
                                                "results": []}


@pytest.mark.parametrize("params", [{"page_size": 201}, {"page_size": 0}, {"limit": 5},
                                    {"cursor": "not-a-cursor"}])
def test_alerts_refuses_a_bad_page_request(operator, params):
    response = operator.get("alerts", **params)
    assert response.status_code == 400 and response.json()["code"] == "validation_error"


# ------------------------------------------------------------------ ledger alerts


def ledger_alerts(*args: str) -> tuple[int, list[str]]:
    out = io.StringIO()
    try:
        call_command("ledger", "alerts", *args, stdout=out)
    except CommandError as error:
        return error.returncode, out.getvalue().splitlines()
    return 0, out.getvalue().splitlines()


def test_ledger_alerts_prints_the_total_and_says_what_it_did_not_show(many_blocked):
    alerts.beat()
    code, lines = ledger_alerts()
    assert code == 1
    listed = [line for line in lines if "UNCLASSIFIED" in line]
    assert len(listed) == 200 and str(many_blocked[0].pk) in listed[0]  # the oldest first
    assert f"{MANY} goal(s) need a human" in lines
    assert lines[-1].startswith(f"{MANY - 200} more not shown (these are the 200 oldest)")
    assert "`ledger alerts --all`" in lines[-1]

    code, lines = ledger_alerts("--all")
    assert code == 1 and lines[-1] == f"{MANY} goal(s) need a human"
    # Each line: the instant since when (UTC to the second), then the goal.
    assert [line.split()[3] for line in lines[:-1]] == [str(g.pk) for g in many_blocked]
    assert re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC  ", lines[0])

    code, lines = ledger_alerts("--limit", "0")
    assert code == 1 and lines == [f"{MANY} goal(s) need a human",
                                   f"{MANY} more not shown (these are the 0 oldest): "
                                   "`ledger alerts --all`, or GET /api/v1/alerts page by page"]


# ------------------------------------------------------------------ ledger doctor


def ledger_doctor(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("ledger", "doctor", *args, stdout=out)
    except CommandError as error:
        return error.returncode, out.getvalue()
    return 0, out.getvalue()


def test_doctor_counts_every_goal_and_says_only_what_it_checked(many_blocked):
    GoalFactory()  # one active goal that needs nobody
    alerts.beat()
    code, out = ledger_doctor()
    assert code == 0, out
    assert f"{MANY} goal(s) need a human" in out
    assert (f"each of the {MANY + 1} active goal(s) is within its deadline (1) or listed in "
            f"`ledger alerts` ({MANY})") in out


def test_doctor_does_not_claim_a_goal_is_listed_when_the_alerts_query_misses_it(clock):
    template = blocked_goal()
    # Blocked by its state, but its columns say nobody must look: /alerts
    # cannot list it, and the doctor must not say it does.
    [hidden] = clones(template, 1, attention="")
    alerts.beat()
    code, out = ledger_doctor()
    assert code == 1
    assert f"goal {hidden.pk}: unlisted: needs a human (UNCLASSIFIED)" in out
    assert "no problems" not in out
    assert "1 goal(s) need a human" in out  # the one the query lists: the template


# ------------------------------------------------------------------ the sweeper's heartbeat


def test_a_sweep_that_fails_does_not_beat(clock):
    GoalFactory()
    clock.advance(hours=1)  # its lease is past: the sweep has a goal to check
    with mock.patch.object(tasks.sweeps, "check_goal", side_effect=RuntimeError("poisoned")), \
            pytest.raises(RuntimeError):
        tasks.sweep_leases()
    assert not SchedulerBeat.objects.exists()
    assert alerts.scheduler_health()["status"] == "never_ran"
    with mock.patch.object(tasks.outbox, "send_pending", side_effect=RuntimeError("down")), \
            pytest.raises(RuntimeError):
        tasks.sweep_leases()  # fails after the goals, before the end: still no beat
    assert not SchedulerBeat.objects.exists()
    tasks.sweep_leases()
    assert SchedulerBeat.objects.get().at == clock()
    assert alerts.scheduler_health()["status"] == "ok"


# ------------------------------------------------------------------ the scheduler's own rows


@pytest.mark.parametrize("name", [doctor.SWEEPER_NAME, doctor.REPAIR_NAME])
def test_doctor_fix_reschedules_a_system_row_due_years_from_now(clock, name):
    alerts.beat()
    code = "sweeper" if name == doctor.SWEEPER_NAME else "repair"
    Schedule.objects.filter(name=name).update(next_run=clock() + timedelta(days=3 * 365))
    status, out = ledger_doctor()
    assert status == 1 and f"scheduler: {code}_misscheduled: django-q2 row {name} is next due" \
        in out
    status, out = ledger_doctor("--fix")
    assert status == 0, out
    assert f"fixed: restored django-q2 row {name}" in out and "no problems" in out
    row = Schedule.objects.get(name=name)
    assert row.next_run <= clock() and row.repeats == -1  # due at once


def test_the_sweeper_reschedules_a_repair_row_due_years_from_now(clock, monkeypatch):
    monkeypatch.setattr(tasks, "_repair_looked_at", None)
    Schedule.objects.filter(name=doctor.REPAIR_NAME).update(
        next_run=clock() + timedelta(days=3 * 365))
    tasks.sweep_leases()
    assert Schedule.objects.get(name=doctor.REPAIR_NAME).next_run <= clock()


def test_a_repair_row_long_past_is_misscheduled_only_while_the_scheduler_runs(clock):
    Schedule.objects.filter(name=doctor.REPAIR_NAME).update(next_run=clock() - timedelta(hours=3))
    # No sweeper has run: everything is behind, and that is the scheduler's problem.
    problems = {f.problem for f in doctor.findings()}
    assert "scheduler_never_ran" in problems and "repair_misscheduled" not in problems
    alerts.beat()
    problems = {f.problem for f in doctor.findings()}
    assert problems == {"repair_misscheduled"}


def test_timing_problem_judges_by_every_clock():
    now, every = timezone.now(), timedelta(hours=1)
    late = timedelta(minutes=5)  # liveness.SCHEDULER_LATENESS
    assert housekeeping.timing_problem(now + every, every, [now], scheduler_runs=True) == ""
    assert housekeeping.timing_problem(now + every + late + timedelta(seconds=1), every, [now],
                                       scheduler_runs=True) == housekeeping.FAR_AHEAD
    assert housekeeping.timing_problem(now - late - timedelta(seconds=1), every, [now],
                                       scheduler_runs=True) == housekeeping.BEHIND
    assert housekeeping.timing_problem(now - timedelta(days=1), every, [now],
                                       scheduler_runs=False) == ""
    assert housekeeping.timing_problem(None, every, [now], scheduler_runs=False) == \
        housekeeping.UNSCHEDULED
    # Right by one clock (a frozen test clock, the wall clock): left alone.
    assert housekeeping.timing_problem(now + timedelta(days=5), every,
                                       [now, now + timedelta(days=5)], scheduler_runs=True) == ""


# ------------------------------------------------------------------ the dashboard


def test_the_dashboard_counts_every_goal_and_links_to_the_rest(many_blocked):
    client = staff("olga", "operator")
    page = client.get("/admin/ledger/goal/dashboard/").content.decode()
    assert f"Blocked: UNCLASSIFIED ({MANY})" in page
    assert f"{MANY - 50} more not shown (these are the 50 oldest goals of {MANY})" in page
    assert "/admin/ledger/goal/?needs_human=UNCLASSIFIED" in page
    assert many_blocked[0].goal_key in page  # the oldest is among those shown
    listing = client.get("/admin/ledger/goal/?needs_human=UNCLASSIFIED").content.decode()
    assert f'data-testid="result-count">{MANY} goals' in listing
    everyone = client.get("/admin/ledger/goal/?needs_human=any").content.decode()
    assert f'data-testid="result-count">{MANY} goals' in everyone


# ------------------------------------------------------------------ "the reset wake"

CLAUDE_LIMIT = "Claude usage limit reached. Your limit will reset in 10 minutes."


@pytest.mark.parametrize(("cadence", "said"), [
    (5, "the scheduler fires the next wake, due 2026-12-02T09:05:00.000000Z"),
    (60, "the scheduler fires the reset wake, due 2026-12-02T09:12:00.000000Z")])
def test_only_a_paused_goals_reset_wake_is_called_the_reset_wake(agent, started, clock,
                                                                cadence, said):
    gid, lease = started(cadence_minutes=cadence)
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    paused = agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                              "error_text": CLAUDE_LIMIT}).json()
    assert paused["status"] == "paused"
    # Paused until 09:12 (reset + margin); a 5-minute watchdog's slot at 09:05
    # comes first, and is what the goal waits for — not the reset wake.
    assert agent.get(f"goals/{gid}").json()["expected"]["detail"].startswith(said)
