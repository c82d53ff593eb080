"""Issue 24: what a newcomer and an auditor hit — each bug with the test that
failed before its fix."""

from datetime import UTC, datetime

import pytest

from ledger.domain.events import iso
from ledger.models import Goal
from tests.factories import lease_of
from tests.test_admin import staff

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"


def _start(agent, **policy):
    body = agent.start(policy={"lease_seconds": 300, **policy}).json()
    return body["goal"]["id"], lease_of(body)


# ---------------------------------------------------------------- 2. timestamps

EXTREMES = ["0001-01-01T00:00:00Z", "0999-06-01T12:00:00+00:00", "0001-01-01T00:00:00+05:00",
            "9999-12-31T23:59:59-05:00", "9999-12-31T23:59:59.999999Z"]


@pytest.mark.parametrize("at", EXTREMES)
def test_a_wake_at_any_instant_is_a_problem_never_a_500(agent, clock, at):
    gid, lease = _start(agent)
    for path, body in ((f"goals/{gid}/checkpoints",
                        {"current_step": "x", "progress_pct": 10, "release_lease": True}),
                       (f"goals/{gid}/lease/release", {})):
        answer = agent.post(path, {"lease": lease, **body,
                                   "wake": {"at": at, "reason": "scheduled_progress"}})
        assert answer.status_code == 400, answer.content
        assert answer["Content-Type"] == PROBLEM
        assert answer.json()["code"] == "time_out_of_range", answer.json()


@pytest.mark.parametrize("due", [*EXTREMES, "1970-01-01T00:00:00+00:00",
                                 "9998-12-31T23:59:59-05:00"])
def test_a_receipt_due_at_any_instant_round_trips_or_is_refused(agent, clock, due):
    gid, lease = _start(agent, cadence_minutes=60, scheduler="host")
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    answer = agent.post(f"goals/{gid}/watchdog/receipts", {
        "lease": lease, "status": "created", "host_ref": "42", "due_at": due,
        "runs_on": "local"})
    assert answer.status_code in (200, 400), answer.content
    if answer.status_code == 400:
        assert answer.json()["code"] == "time_out_of_range", answer.json()
    else:
        # Accepted: it reads back, in the API and in the admin's lists.
        assert agent.get(f"goals/{gid}").status_code == 200
        assert agent.get(f"goals/{gid}/events").status_code == 200
        watchdog = Goal.objects.get(pk=gid).state["watchdog"]
        assert datetime.fromisoformat(watchdog["due_at"] if "due_at" in watchdog
                                      else watchdog["anchor"]) == datetime.fromisoformat(due)
        auditor = staff("auditor-24", "auditor")
        for url in (f"/admin/ledger/goal/{gid}/timeline/", "/admin/ledger/goal/",
                    "/admin/ledger/event/"):
            assert auditor.get(url).status_code == 200, url


def test_every_instant_the_ledger_formats_parses_back():
    for moment in (datetime(1, 1, 1, tzinfo=UTC), datetime(999, 6, 1, 12, tzinfo=UTC),
                   datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)):
        assert datetime.fromisoformat(iso(moment)) == moment
    assert iso(datetime(1, 1, 1, tzinfo=UTC)) == "0001-01-01T00:00:00.000000Z"
