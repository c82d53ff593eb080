"""`manage.py ledger goals | show | demo` and the rendering they share
(ledger/operators/terminal.py)."""

import io
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_q.models import Schedule

from ledger.domain import Heartbeat, RecordCheckpoint, kinds
from ledger.eventstore import store
from ledger.models import Event, Goal
from ledger.operators import demo, doctor, summaries, terminal
from scheduling import maintenance, sealing, watchdogs
from tests.factories import GoalFactory, proof_of
from tests.helpers import ledger_text

pytestmark = pytest.mark.django_db

ANSI = re.compile(r"\x1b\[")
SGR = re.compile(r"\x1b\[[\d;]*m")
# "   seq  YYYY-MM-DD HH:MM:SS  …": one printed event
EVENT_LINE = re.compile(r"^ +(\d+)  (?:\x1b\[\d+m)?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", re.M)


class Tty(io.StringIO):
    """A stream that says it is a terminal, as a real one would."""

    def isatty(self) -> bool:
        return True


def seqs(output: str) -> list[int]:
    return [int(seq) for seq in EVENT_LINE.findall(output)]


@pytest.fixture
def goals(clock):
    """Four goals updated one after another (the last one most recently)."""
    made = {}
    for name, kwargs in (("done", {"checkpoints": 2, "finish": "completed"}),
                         ("running", {"checkpoints": 3}),
                         ("blocked", {"checkpoints": 1, "finish": "blocked"}),
                         ("other", {"agent": "agent-2", "goal_key": "other-agent"})):
        clock.advance(minutes=10)
        made[name] = GoalFactory(**kwargs)
    clock.advance(minutes=5)
    return made


# ----------------------------------------------------------------------------- goals


def rows_of(output: str) -> list[str]:
    """The short ids of the table's rows, in printed order."""
    return [line.split()[0] for line in output.splitlines()[1:-1]]


def test_goals_lists_the_most_recently_updated_first(goals):
    out = ledger_text("goals")
    header, *_ = out.splitlines()
    assert header.split("  ")[0] == "ID" and "NEXT WAKE" in header and "UPDATED" in header
    expected = [terminal.short_id(goals[n].pk) for n in ("other", "blocked", "running", "done")]
    assert rows_of(out) == expected
    running = next(line for line in out.splitlines()
                   if line.startswith(terminal.short_id(goals["running"].pk)))
    # status, progress, lease holder and generation, relative update time
    assert re.search(r"running\s+-\s+30%\s+agent-1 g1\s+-\s+25m ago$", running)
    assert "blocked  AGENT_BLOCKED" in out
    assert out.rstrip().endswith("4 goal(s)")


def test_goals_filters_by_status_reason_and_agent_and_limits(goals):
    short = {name: terminal.short_id(goal.pk) for name, goal in goals.items()}
    assert rows_of(ledger_text("goals", "--status", "done")) == [short["done"]]
    assert rows_of(ledger_text("goals", "--status", "running", "blocked")) == [
        short["other"], short["blocked"], short["running"]]
    assert rows_of(ledger_text("goals", "--status", "done", "--status", "blocked")) == [
        short["blocked"], short["done"]]
    # reasons are matched case-insensitively on input, as listed in the domain
    assert rows_of(ledger_text("goals", "--reason", "agent_blocked")) == [short["blocked"]]
    assert rows_of(ledger_text("goals", "--agent", "agent-2")) == [short["other"]]
    assert rows_of(ledger_text("goals", "--agent", "nobody")) == []
    limited = ledger_text("goals", "--limit", "2")
    assert rows_of(limited) == [short["other"], short["blocked"]]
    assert limited.rstrip().endswith("2 goal(s) of 4 (raise --limit to see more)")


@pytest.mark.parametrize("args", [("--status", "sleeping"), ("--reason", "NO_SUCH_REASON"),
                                  ("--limit", "0")])
def test_goals_refuses_unknown_filters(goals, args):
    with pytest.raises(CommandError):
        ledger_text("goals", *args)


# ----------------------------------------------------------------------------- show


def test_show_prints_the_state_then_the_events_in_order_with_summaries(clock):
    goal = GoalFactory(checkpoints=2, objective="Fix the flaky checkout test")
    out = ledger_text("show", str(goal.pk))
    head, timeline = out.split("\ntimeline: ")
    assert f"goal:          {goal.pk}  ({goal.goal_key} @ {goal.workspace}" in head
    assert "objective:     Fix the flaky checkout test" in head
    assert "status:        running" in head
    assert "progress:      [████················] 20 %, 3 checkpoint(s)" in head
    assert "step:          “step 2”" in head
    assert "next:          step 3" in head
    assert "lease:         agent-1 gen 1, expires 2026-12-02 09:10:00 (in 10m)" in head
    assert "watchdog:      none" in head
    assert "continuations: 0 of 3 used (3 left)" in head
    assert "jobs:          none" in head and "approvals:     none pending" in head

    assert timeline.startswith("last 5 of 5 event(s)\n")
    assert seqs(out) == [1, 2, 3, 4, 5]
    lines = timeline.splitlines()[1:]
    assert "goal.started" in lines[0] and "“Fix the flaky checkout test” by agent-1" in lines[0]
    assert "workspace.bound" in lines[1]
    assert lines[2].endswith("gen 1 to agent-1 until 2026-12-02 09:10:00 UTC")
    assert "✓ checkpoint.recorded" in lines[3]
    assert lines[3].endswith("step “step 1” (10 %) → next: step 2")
    assert lines[4].endswith("step “step 2” (20 %) → next: step 3")
    assert not ANSI.search(out)  # a StringIO is not a terminal


def test_show_prints_a_completed_goals_evidence_and_the_timeline_line(clock):
    goal = GoalFactory(done_criteria=("tests pass", "PR opened"), finish="completed")
    out = ledger_text("show", str(goal.pk))
    head, timeline = out.split("\ntimeline: ")
    assert ("summary:       finished\n"
            "evidence:      “tests pass” ⇒ checked: tests pass\n"
            "               “PR opened” ⇒ checked: PR opened\n"
            "updated:       ") in head
    assert timeline.splitlines()[-1].endswith(
        "completed: finished · evidence: “tests pass” ⇒ checked: tests pass; “PR opened” ⇒ "
        "checked: PR opened")


def test_show_of_a_completion_without_evidence_says_so():
    # A goal with no done criteria completes with no evidence.
    assert summaries.evidence_lines({"summary": "finished", "generation": 1, "evidence": []}) \
        == ["evidence:      none recorded (no done criteria)"]


def test_show_accepts_the_short_id_the_table_prints(clock):
    goal = GoalFactory()
    assert str(goal.pk) in ledger_text("show", terminal.short_id(goal.pk))
    assert str(goal.pk) in ledger_text("show", str(goal.pk).upper())


def test_show_prints_the_last_50_events_of_a_long_history_and_streams_all(clock):
    """One 2,000-event goal (start: 3 events, then heartbeats) for every
    variant: building it is the slow part, on PostgreSQL above all."""
    goal = GoalFactory()
    state = store.load(goal.pk)
    while state.version < 2000:
        clock.advance(seconds=1)
        state = store.execute(goal.pk, Heartbeat(proof_of(state)), actor="agent-1").state

    with CaptureQueriesContext(connection) as queries:
        out = ledger_text("show", str(goal.pk))
    assert seqs(out) == list(range(1951, 2001))
    assert "timeline: last 50 of 2000 event(s); --all for the 1950 before" in out
    # The goal row and one slice of its events: never the whole history.
    assert len(queries) <= 3, [q["sql"] for q in queries]
    event_queries = [q["sql"] for q in queries if Event._meta.db_table in q["sql"]]
    assert len(event_queries) == 1 and "LIMIT 50" in event_queries[0]

    assert seqs(ledger_text("show", str(goal.pk), "--limit", "7")) == list(range(1994, 2001))

    with CaptureQueriesContext(connection) as queries:
        out = ledger_text("show", str(goal.pk), "--all")
    assert seqs(out) == list(range(1, 2001))
    assert "timeline: all 2000 event(s)" in out
    assert "lease.renewed" in out.splitlines()[-1]
    assert len(queries) <= 3


def test_show_refuses_all_with_limit(clock):
    goal = GoalFactory()
    with pytest.raises(CommandError):
        ledger_text("show", str(goal.pk), "--all", "--limit", "5")


@pytest.mark.parametrize("value, message", [
    ("not-a-uuid", "is not a goal id"),
    ("zz12", "is not a goal id"),
    ("abc", "is not a goal id"),  # too short to be a prefix
    ("00000000-0000-0000-0000-000000000000", "no such goal"),
    ("00000000", "no such goal"),
    ("abcd", "matches several goals"),
])
def test_show_refuses_unknown_malformed_and_ambiguous_ids(clock, value, message):
    GoalFactory(goal_id="abcd0000-0000-4000-8000-000000000001")
    GoalFactory(goal_id="abcd0000-0000-4000-8000-000000000002")
    with pytest.raises(CommandError, match=message):
        ledger_text("show", value)


# ----------------------------------------------------------------------------- colour


def test_colour_only_on_a_terminal(goals):
    goal_id = str(goals["running"].pk)
    assert not ANSI.search(ledger_text("goals") + ledger_text("show", goal_id))

    tty_goals = ledger_text("goals", stdout=Tty())
    tty_show = ledger_text("show", goal_id, stdout=Tty())
    assert "\x1b[32mrunning" in tty_goals  # status colour
    assert "\x1b[32m✓ checkpoint.recorded" in tty_show  # family colour
    assert "\x1b[36m⇄ lease.acquired" in tty_show
    # Colour does not shift the columns: without the escapes, the same text.
    assert SGR.sub("", tty_goals) == ledger_text("goals")
    assert SGR.sub("", tty_show) == ledger_text("show", goal_id)

    assert not ANSI.search(ledger_text("goals", stdout=Tty(), no_color=True))
    assert ANSI.search(ledger_text("goals", force_color=True))


def test_colour_respects_no_color(goals, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    assert not ANSI.search(ledger_text("goals", stdout=Tty()))


# ----------------------------------------------------------------------------- summaries


def all_kinds() -> list[str]:
    return [value for name, value in vars(kinds).items()
            if name.isupper() and isinstance(value, str) and "." in value]


def test_every_event_kind_has_its_own_summary():
    from ledger.domain.codec import Payload

    summarised = {payload.KIND for payload in kinds.PAYLOADS if payload.line is not Payload.line}
    assert set(all_kinds()) <= summarised, "add a summary for the new kind"


@pytest.mark.parametrize("kind, data, text", [
    ("checkpoint.recorded", {"current_step": "tests written", "progress_pct": 40,
                             "next_actions": ["fix the race"], "artifacts": [{"path": "a"}]},
     "step “tests written” (40 %) → next: fix the race, 1 artifact(s)"),
    ("lease.acquired", {"holder": "agent-1", "generation": 2,
                        "expires_at": "2026-12-02T09:10:00.000000Z", "via": "agent"},
     "gen 2 to agent-1 until 2026-12-02 09:10:00 UTC"),
    ("wake.claimed", {"outcome": "recurring_acquired", "reason": "timeout_recovery",
                      "source": "internal", "notes": ""},
     "recurring_acquired (timeout_recovery), internal"),
    ("run.reported", {"outcome": "error", "class": "rate_limit",
                      "reset_at": "2026-12-02T10:00:00.000000Z", "retry_after": ""},
     "rate_limit, reset 2026-12-02 10:00:00 UTC"),
    ("goal.blocked", {"reason": "INTERRUPTED_UNKNOWN", "summary": "went silent"},
     "blocked (INTERRUPTED_UNKNOWN): went silent"),
    ("continuation.charged", {"attempt": 1, "max": 3}, "continuation 1 of 3 charged"),
    # A goal without done criteria completes with no evidence.
    ("goal.completed", {"summary": "merged", "generation": 1, "evidence": []},
     "completed: merged"),
    ("goal.completed", {"summary": "merged", "generation": 1, "evidence": [
        {"criterion": "CI green", "evidence": "run 7"}]},
     "completed: merged · evidence: “CI green” ⇒ run 7"),
])
def test_summaries_read_like_sentences(kind, data, text):
    assert summaries.summary(kind, data) == text


def test_summaries_never_raise_and_stay_one_safe_line():
    # Agents' text may carry escapes and newlines: they must not reach the terminal.
    hostile = summaries.summary("checkpoint.recorded", {
        "current_step": "done\x1b[2J\x1b]0;owned\x07\nnext line\u202e", "progress_pct": 5})
    assert "\x1b" not in hostile and "\n" not in hostile and "\u202e" not in hostile
    assert "done" in hostile and "next line" in hostile
    for kind in all_kinds():  # old events may lack any field
        assert isinstance(summaries.summary(kind, {}), str)
    assert summaries.summary("future.kind", {"b": 2, "a": "x\ny"}) == "a=x y, b=2"
    assert summaries.summary("lease.acquired", None) == "gen ? to ? until ?"  # type: ignore[arg-type]


def test_relative_times():
    now = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
    assert terminal.relative(now + timedelta(seconds=30), now) == "in 30s"
    assert terminal.relative(now - timedelta(seconds=30), now) == "30s ago"
    assert terminal.relative(now + timedelta(milliseconds=300), now) == "now"
    assert terminal.relative(now + timedelta(minutes=12), now) == "in 12m"
    assert terminal.relative("2026-12-02T06:55:00.000000Z", now) == "2h05m ago"
    assert terminal.relative(now - timedelta(days=3, hours=1), now) == "3d ago"
    assert terminal.relative("", now) == "-"


# ----------------------------------------------------------------------------- demo


def test_demo_tells_real_histories_that_replay_and_verify(clock):
    out = ledger_text("demo")
    goals = {g.goal_key: g for g in Goal.objects.filter(agent="demo-agent")}
    assert out.startswith(f"made {len(goals)} demo goal(s) for agent demo-agent:")
    assert 5 <= len(goals) <= 7
    assert {(g.status, g.reason) for g in goals.values()} >= {
        ("done", ""), ("running", ""), ("paused", "RATE_LIMITED"), ("blocked", "BLOCKED_APPROVAL"),
        ("blocked", "INTERRUPTED_UNKNOWN")}
    # Nothing written by hand: the events fold into exactly the stored projections.
    ledger_text("replay", "--check")
    ledger_text("verify")

    def kinds_of(key: str) -> list[str]:
        return list(Event.objects.filter(goal=goals[key]).order_by("seq")
                    .values_list("kind", flat=True))

    # The demo's completions carry their evidence, one item per done criterion.
    completion = Event.objects.get(goal=goals[demo.FIRST_KEY], kind="goal.completed")
    assert [i["criterion"] for i in completion.data["evidence"]] == [
        "every endpoint documented", "link checker clean", "CI green"]
    rate_limited = kinds_of("checkout-flaky-test")
    assert rate_limited.index("goal.paused") < rate_limited.index("continuation.charged") \
        < rate_limited.index("goal.completed")
    assert "lease.taken_over" in kinds_of("django-5.2-upgrade")
    # The silent continuation blocks the goal, and its watchdog goes with it.
    assert kinds_of("help-centre-de")[-3:] == ["lease.expired", "goal.blocked",
                                               "receipt.recorded"]

    # Spread over the last hours, nothing in the future.
    times = Event.objects.filter(goal__agent="demo-agent").values_list("recorded_at", flat=True)
    assert clock() - timedelta(hours=8) < min(times) and max(times) <= clock()
    # Still-active goals look ahead: a live lease, a next wake after now.
    running = store.load(goals["search-reindex"].pk)
    assert running.lease.expires_at > clock()
    assert goals["search-reindex"].next_wake_at > clock()
    assert goals["changelog-0.9"].paused_until > clock()
    # The scheduler agrees with the ledger: only the live watchdog and the
    # pending reset wake remain, due after now.
    schedules = dict(Schedule.objects.filter(name__startswith="wakeledger-")
                     .exclude(name__in=(watchdogs.SWEEPER_NAME, maintenance.PRUNE_NAME,
                                        doctor.REPAIR_NAME,
                                        sealing.SEAL_NAME))
                     .values_list("name", "next_run"))
    assert schedules.keys() == {watchdogs.schedule_name(goals["search-reindex"].pk),
                                watchdogs.reset_schedule_name(goals["changelog-0.9"].pk)}
    assert all(due > clock() for due in schedules.values())

    user = get_user_model().objects.get(username="demo-agent")
    assert list(user.groups.values_list("name", flat=True)) == ["agent"]


def test_demo_twice_keeps_one_set_and_again_adds_another(clock):
    ledger_text("demo")
    count = Goal.objects.count()
    again = ledger_text("demo")
    assert f"{count} demo goal(s) already exist" in again
    assert Goal.objects.count() == count

    clock.advance(hours=1)
    out = ledger_text("demo", "--again")
    assert "docs-api-reference-2" in out
    assert Goal.objects.count() == 2 * count
    assert Goal.objects.filter(workspace__startswith="/srv/demo/set-2/").count() == count
    ledger_text("replay", "--check")
    ledger_text("verify")


def test_demo_goals_keep_working_with_the_real_commands(clock):
    """The demo's running goal is an ordinary goal: its agent can go on."""
    ledger_text("demo")
    goal = Goal.objects.get(goal_key="search-reindex")
    state = store.load(goal.pk)
    after = store.execute(goal.pk, RecordCheckpoint(
        "compared hit counts", 90, proof=proof_of(state)), actor="demo-agent").state
    assert after.progress_pct == 90
    assert "compared hit counts" in ledger_text("show", terminal.short_id(goal.pk), "--limit", "1")


# ------------------------------------------------------------- relative times in the goals table


def test_the_goals_table_says_30s_ago_not_now(clock):
    import io

    from django.core.management import call_command

    from tests.factories import GoalFactory

    GoalFactory(checkpoints=1)
    clock.advance(seconds=30)
    out = io.StringIO()
    call_command("ledger", "goals", stdout=out)
    assert "30s ago" in out.getvalue() and " now" not in out.getvalue()

