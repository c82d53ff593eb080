"""A scheduled fire reads the scheduler's beats (the window in which no sweep
completed) only when its claim meets a lease, the one thing that window
changes: the read was a query on every fire. The outcome with and without an
outage is pinned in test_outage_grace.py."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ledger.models import SchedulerBeat
from ledger.services import alerts
from scheduling import tasks

pytestmark = pytest.mark.django_db

BEATS = SchedulerBeat._meta.db_table


def beat_reads(queries: CaptureQueriesContext) -> int:
    return sum(BEATS in query["sql"] for query in queries.captured_queries)


def test_a_fire_that_meets_no_lease_reads_no_beat(agent, started, clock):
    gid, lease = started()
    assert agent.post(f"goals/{gid}/lease/release", {"lease": lease}).status_code == 200
    alerts.beat()
    clock.advance(minutes=10)  # silent since: a read would notice the gap
    with CaptureQueriesContext(connection) as queries:
        outcome = tasks.fire_watchdog(gid, intended_date=clock().isoformat(), kind="requested")
    assert outcome == "ready_for_pull"
    assert beat_reads(queries) == 0


def test_a_fire_that_meets_a_lease_reads_the_beats(agent, started, clock):
    gid, _lease = started()
    alerts.beat()
    clock.advance(minutes=10)
    with CaptureQueriesContext(connection) as queries:
        outcome = tasks.fire_watchdog(gid, intended_date=clock().isoformat(), kind="requested")
    assert outcome == "worker_busy_noop"  # the outage's grace, read on demand
    assert beat_reads(queries) >= 1
