"""Defects the soak (bench/soak.py) found, reproduced deterministically and
kept as regression tests once fixed."""

import json
from http.server import BaseHTTPRequestHandler

import pytest
from rest_framework.test import APIClient

from ledger.models import Event
from scheduling import tasks
from scheduling.models import Dispatch
from tests.receivers import serving

SECRET = "soak-finding-secret"


@pytest.mark.django_db(transaction=True)
def test_a_continuation_that_finishes_before_its_dispatch_is_recorded_keeps_the_record(
        agent, clock, settings):
    """In the soak, a receiver's agent finished its goal with the pushed lease
    a few milliseconds after the webhook arrived, before the outbox recorded
    `continuation.dispatched`; the record was then refused ("the goal is done;
    it accepts no more work", scheduling/outbox.py _record) and the ledger
    shows a granted, charged wake with no dispatch, although the outbox row
    says `sent`. Here the receiver finishes the goal before it answers 202."""
    finished = []

    class FinishingReceiver(BaseHTTPRequestHandler):  # an agent host that works fast
        def do_POST(self):  # http.server's naming
            packet = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent.token}")
            lease = {"token": packet["lease"]["token"],
                     "generation": packet["lease"]["generation"]}
            answer = client.post(f"/api/v1/goals/{packet['goal_id']}/finish",
                                 {"lease": lease, "status": "completed", "summary": "done",
                                  "evidence": [{"criterion": "CI green",
                                                "evidence": "run 7 passed"}]},
                                 format="json")
            finished.append(answer.status_code)
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    with serving(FinishingReceiver) as port:
        settings.WAKELEDGER_DISPATCHERS = {"hook": {
            "type": "webhook", "url": f"http://127.0.0.1:{port}/hook", "secret": SECRET}}
        body = agent.start(policy={"dispatch": "hook", "lease_seconds": 300}).json()
        gid = body["goal"]["id"]
        lease = {"token": body["lease"]["token"], "generation": body["lease"]["generation"]}
        agent.post(f"goals/{gid}/watchdog", {"lease": lease})
        clock.advance(hours=1, minutes=1)  # the agent vanished; its slot is due
        assert tasks.fire_watchdog(gid, intended_date="occ-1") == "recurring_acquired"

    assert finished == [200]
    assert Dispatch.objects.get(goal_id=gid).status == Dispatch.SENT
    kinds = list(Event.objects.filter(goal_id=gid).order_by("seq").values_list("kind", flat=True))
    assert "continuation.charged" in kinds and "goal.completed" in kinds
    assert "continuation.dispatched" in kinds  # the push that did the work is on record
