"""What grows with the number of goals must not read every goal (bench/scale.py):
the plans of the queries behind /alerts, its total and the alert counts of
/metrics and the dashboard, checked with the database's own EXPLAIN."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from ledger.eventstore import clock
from ledger.models import Goal
from ledger.services import alerts


def plan(sql: str, params: list | tuple = ()) -> str:
    """The plan of ``sql``. On PostgreSQL with sequential scans priced out, so
    the answer is whether an index path exists at all (a handful of test rows
    would always be read whole)."""
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        else:
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(" ".join(str(c) for c in row) for row in cursor.fetchall())


def reads_no_goal_whole(explained: str) -> bool:
    if connection.vendor == "sqlite":
        return "SCAN ledger_goal" not in explained.replace("SCAN ledger_goal USING", "")
    return "Seq Scan on ledger_goal" not in explained


@pytest.fixture
def analyzed(db):
    """Many active goals, a few needing a human, deadlines ahead; statistics
    taken (the planner's choice follows them, as on a real database)."""
    from datetime import timedelta

    now = clock.now()
    Goal.objects.bulk_create(
        Goal(workspace=f"/srv/scale/{i}", goal_key="g", agent="agent-1", status="waiting",
             attention="WAKE_RETRIES_EXHAUSTED" if i % 500 == 0 else "",
             deadline_at=now + timedelta(minutes=1 + i % 600), created_at=now, updated_at=now,
             version=1, last_hash="", state={}) for i in range(3000))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def test_the_alerts_page_and_its_total_search_two_indexes_instead_of_every_goal(analyzed):
    listed = alerts.needing_a_human(Goal.objects.all(), clock.now())
    with CaptureQueriesContext(connection) as queries:
        list(listed[:50])
        listed.count()
    page, total = (q["sql"] for q in queries.captured_queries)
    for sql in (page, total):
        explained = plan(sql)
        assert "ledger_goal_attention_set" in explained, explained
        assert "ledger_goal_deadline" in explained, explained
        assert reads_no_goal_whole(explained), explained


def test_the_alert_counts_by_reason_read_the_attention_index(analyzed):
    with CaptureQueriesContext(connection) as queries:
        alerts.counts_by_reason(Goal.objects.all(), clock.now())
    grouped, overdue = (q["sql"] for q in queries.captured_queries)
    assert "ledger_goal_attention_set" in plan(grouped)
    assert "ledger_goal_deadline" in plan(overdue)
    assert reads_no_goal_whole(plan(grouped)) and reads_no_goal_whole(plan(overdue))


@pytest.mark.parametrize("attention", ["", "HOST_SILENT", "BLOCKED"])
def test_attention_set_means_a_non_empty_attention(db, attention):
    """``attention > ''`` (seekable) stands for ``attention != ''``: the same goals."""
    from tests.factories import GoalFactory

    goal = GoalFactory()
    Goal.objects.filter(pk=goal.pk).update(attention=attention)
    matched = Goal.objects.filter(alerts.ATTENTION_SET, pk=goal.pk).exists()
    assert matched == (attention != "")


def test_a_scrape_reads_the_goal_table_only_for_the_alert_counts(analyzed):
    """Goals by status and reason come from their tallies
    (ledger/eventstore/tallies.py): the only statements of a /metrics scrape
    that read the goal table are the two alert counts, each a search of its
    index. Before the tallies, a GROUP BY walked the (status, reason) index over
    every active goal: a million index entries at a million goals."""
    from prometheus_client import generate_latest

    from ledger.operators import metrics

    with CaptureQueriesContext(connection) as queries:
        generate_latest(metrics.registry())
    on_goals = [q["sql"] for q in queries.captured_queries if '"ledger_goal"' in q["sql"]]
    assert len(on_goals) == 2, on_goals
    grouped, overdue = (plan(sql) for sql in on_goals)
    assert "ledger_goal_attention_set" in grouped and "ledger_goal_deadline" in overdue
    for explained in (grouped, overdue):
        assert reads_no_goal_whole(explained), explained
        if connection.vendor == "sqlite":  # not even a whole covering index
            assert "SCAN ledger_goal" not in explained, explained


# ------------------------------------------------------------------ the dashboard

# Tables that grow with the goals, their history or the scheduler's rows: the
# dashboard may read none of them whole (small ones, the user or the session,
# are read by primary key anyway; ledger_doctorpass keeps passes.KEEP rows).
LARGE_TABLES = ("ledger_goal", "ledger_event", "django_q_schedule", "django_q_task",
                "ledger_doctorfinding", "ledger_goalnotice", "ledger_notification")


def whole_reads(explained: str) -> list[str]:
    """The large tables a plan reads whole (SQLite's SCAN without an index,
    PostgreSQL's Seq Scan, priced out so it shows only where no index serves)."""
    if connection.vendor == "sqlite":
        lines = [line for line in explained.splitlines()
                 if " SCAN " in f" {line} " and " USING " not in line]
        return [t for t in LARGE_TABLES for line in lines if f"SCAN {t}" in line]
    return [t for t in LARGE_TABLES if f"Seq Scan on {t}" in explained]


@pytest.fixture
def dashboard_world(db):
    """3,000 active goals with a real goal's state (the dashboard reads the
    state of those it shows), 6 needing a human, and a kept doctor pass that
    found 120 of them with a wake row missing; statistics taken."""
    from datetime import timedelta

    from ledger.operators import doctor, passes
    from tests.factories import GoalFactory

    template = GoalFactory()
    now = clock.now()
    Goal.objects.bulk_create(
        Goal(workspace=f"/srv/scale/{i}", goal_key="g", agent="agent-1", status="waiting",
             attention="WAKE_RETRIES_EXHAUSTED" if i % 500 == 0 else "",
             deadline_at=now + timedelta(minutes=1 + i % 600), created_at=now, updated_at=now,
             version=1, last_hash="", state=template.state) for i in range(3000))
    ids = [str(pk) for pk in Goal.objects.order_by("-workspace").values_list("pk", flat=True)
           [:120]]
    passes.record("scheduler", now, now, [
        doctor.Finding(gid, "schedule_missing", "its django-q2 row is missing",
                       row=f"wakeledger-watchdog-{gid}") for gid in ids])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return ids


def test_every_statement_of_the_dashboard_is_an_index_read(dashboard_world, admin_client):
    """The dashboard no longer runs the doctor (a query per goal): it reads the
    newest kept pass. Every SELECT of the page, each EXPLAINed: no large table
    read whole, and no more statements than a page with fewer goals makes."""
    with CaptureQueriesContext(connection) as queries:
        page = admin_client.get("/admin/ledger/goal/dashboard/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Wake rows missing or wrong (ledger doctor --fix) (120)" in text
    assert "70 more not shown (these are the 50 oldest goals of 120)" in text
    selects = [q["sql"] for q in queries.captured_queries
               if q["sql"].lstrip().upper().startswith("SELECT")]
    assert any("ledger_doctorfinding" in sql for sql in selects)
    read_whole = {sql[:200]: whole_reads(plan(sql)) for sql in selects}
    assert {sql: tables for sql, tables in read_whole.items() if tables} == {}
    # Bounded by what is shown, not by the goals: no statement per goal.
    assert len(queries.captured_queries) < 40, len(queries.captured_queries)
