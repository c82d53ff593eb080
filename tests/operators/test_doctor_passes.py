"""The doctor's kept passes (ledger/operators/passes.py): what a whole pass
found and did is kept, and the dashboard shows the newest pass, saying when
it ran, instead of checking every goal's wake rows on each view."""

import contextlib
import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_q.models import Schedule

from ledger.models import DoctorFinding, DoctorPass
from ledger.operators import doctor, passes
from ledger.services import alerts
from scheduling import watchdogs

pytestmark = pytest.mark.django_db

DASHBOARD = "/admin/ledger/goal/dashboard/"


@pytest.fixture
def waiting(agent, started, clock):
    """A goal waiting for its hourly internal watchdog (due at 10:00), the
    scheduler's heartbeat fresh."""
    gid, lease = started(cadence_minutes=60)
    agent.post(f"goals/{gid}/lease/release", {"lease": lease})
    alerts.beat()
    return gid


def doctor_command(*args: str) -> str:
    out = io.StringIO()
    with contextlib.suppress(CommandError):  # problems found: exit 1, the lines are in out
        call_command("ledger", "doctor", *args, stdout=out)
    return out.getvalue()


def test_ledger_doctor_over_every_goal_keeps_its_pass_and_one_goal_does_not(waiting, clock,
                                                                           admin_client):
    Schedule.objects.filter(name=watchdogs.schedule_name(waiting)).delete()
    doctor_command(waiting)  # one goal: not a whole pass, nothing kept
    assert not DoctorPass.objects.exists()
    out = doctor_command()
    assert f"goal {waiting}: schedule_missing" in out
    [run] = DoctorPass.objects.all()
    assert (run.source, run.found, run.schedule_goals, run.repairs, run.active) == (
        "doctor", 1, 1, 0, 1)
    [finding] = DoctorFinding.objects.all()
    assert (str(finding.goal), finding.problem, finding.outcome) == (
        waiting, "schedule_missing", "")  # read-only: nothing was repaired
    page = admin_client.get(DASHBOARD).content.decode()
    assert "by `ledger doctor`" in page and "schedule_missing" in page
    assert "not repaired" in page  # what the pass did about it: nothing
    assert not Schedule.objects.filter(name=watchdogs.schedule_name(waiting)).exists()


def test_ledger_doctor_fix_keeps_what_it_found_before_repairing_once(waiting, clock):
    Schedule.objects.filter(name=watchdogs.schedule_name(waiting)).delete()
    out = doctor_command("--fix")
    assert "fixed: goal" in out and "no problems" in out
    [run] = DoctorPass.objects.all()  # the --fix pass only, not the check after it
    assert (run.source, run.schedule_goals, run.repairs) == ("operator", 1, 1)
    assert DoctorFinding.objects.get().outcome == (
        "receipt.recorded repaired: the schedule row was missing")


def test_a_view_reads_the_kept_pass_and_checks_no_row(waiting, clock, admin_client):
    """The page's statements do not depend on how many goals there are: no
    schedule row is read on a view (doctor.findings read one set a goal)."""
    doctor.check()
    Schedule.objects.filter(name=watchdogs.schedule_name(waiting)).delete()
    with CaptureQueriesContext(connection) as queries:
        page = admin_client.get(DASHBOARD).content.decode()
    assert "none missing or wrong" in page  # as of the pass, which said so
    assert not [q for q in queries.captured_queries if "django_q_schedule" in q["sql"]
                or "django_q_task" in q["sql"]]


def test_the_page_says_when_no_pass_ran_or_the_newest_is_stale(waiting, clock, admin_client):
    page = admin_client.get(DASHBOARD).content.decode()
    assert "Wake rows not checked yet" in page and "manage.py ledger doctor</code>" in page
    doctor.fix()  # the hourly repair's call
    page = admin_client.get(DASHBOARD).content.decode()
    assert "by the hourly repair, over the 1 goal(s) active then (1 now): none missing or wrong." \
        in page
    assert "more than two hours ago" not in page
    clock.advance(hours=2, minutes=1)
    alerts.beat()
    page = admin_client.get(DASHBOARD).content.decode()
    assert "more than two hours ago: is the hourly repair running?" in page


def test_passes_beyond_the_newest_keep_are_deleted_with_their_findings(clock):
    finding = doctor.Finding("", "sweeper_missing", "gone", row=doctor.SWEEPER_NAME)
    for i in range(passes.KEEP + 3):
        passes.record("scheduler", clock() + timedelta(hours=i), clock() + timedelta(hours=i),
                      [finding])
    assert DoctorPass.objects.count() == passes.KEEP
    assert DoctorFinding.objects.count() == passes.KEEP
    oldest = DoctorPass.objects.order_by("id").first()
    assert oldest.started_at == clock() + timedelta(hours=3)
    assert passes.latest().started_at == clock() + timedelta(hours=passes.KEEP + 2)


def test_a_pass_stores_at_most_stored_findings_and_counts_every_one(clock, monkeypatch):
    monkeypatch.setattr(passes, "STORED", 5)
    found = [doctor.Finding(f"00000000-0000-0000-0000-{i:012d}", "schedule_late", "late",
                            row=f"wakeledger-watchdog-{i}") for i in range(12)]
    run = passes.record("scheduler", clock(), clock(), found)
    assert (run.found, run.schedule_goals) == (12, 12)
    assert DoctorFinding.objects.filter(run=run).count() == 5
    shown = passes.wake_rows(clock(), limit=50)
    assert shown is not None and shown.count == 12  # the pass's count, not the rows kept


def test_an_orphaned_row_naming_no_goal_is_kept_by_its_row_name(clock):
    """A row named like a goal's wake but holding no goal id (made by hand):
    the pass is still kept, the finding under the scheduler, its row named."""
    name = "wakeledger-watchdog-not-a-goal"
    Schedule.objects.create(name=name, func=watchdogs.FIRE, schedule_type=Schedule.MINUTES,
                            minutes=60)
    alerts.beat()
    doctor.fix()
    run = passes.latest()
    assert run is not None and run.source == "scheduler"
    assert list(DoctorFinding.objects.filter(run=run, problem="schedule_orphaned")
                .values_list("goal", "row")) == [(None, name)]
