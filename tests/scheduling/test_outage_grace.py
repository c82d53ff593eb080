"""A wake that fires right after an outage judges the holder as the sweeper
does (seed 2, 30 days): no sweep completed meanwhile (the database or the
scheduler was down), so the holder's heartbeats may have been refused, and its
stale lease gets RECONNECT_GRACE before a claim treats it as a recovery or as
silence. Through django-q2's task function, on the real store."""

import pytest

from ledger.domain.leases import RECONNECT_GRACE
from ledger.models import Goal
from ledger.services import alerts
from scheduling import tasks
from tests.factories import kinds

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("silence", [True, False], ids=["after-an-outage", "sweeper-running"])
def test_a_fire_after_an_outage_leaves_a_stale_lease_to_its_holder(agent, started, clock,
                                                                  silence):
    gid, lease = started()  # a 300 s lease: stale 6 min from now
    alerts.beat()
    for _ in range(10):
        clock.advance(minutes=1)
        if not silence:
            alerts.beat()  # the sweeper's passes complete: the server heard everyone
    # Ten minutes on, the holder's lease is four minutes past its stale point.
    outcome = tasks.fire_watchdog(gid, intended_date=clock().isoformat(), kind="requested")
    if not silence:
        # Heard all along and still silent: the wake is a recovery, charged.
        assert outcome == "ready_for_pull"
        assert Goal.objects.get(id=gid).state["ready"]["charge"] is True
        return
    assert outcome == "worker_busy_noop"
    state = Goal.objects.get(id=gid).state
    assert not state.get("ready") and state["lease"]["generation"] == lease["generation"]
    # The holder's retry after the outage is heard, and its attempt goes on.
    clock.advance(minutes=2)
    assert agent.post(f"goals/{gid}/lease/heartbeat", {"lease": lease}).status_code == 200
    tasks.sweep_leases()
    assert "lease.expired" not in kinds(gid)


def test_a_holder_silent_past_the_reconnect_grace_is_recovered(agent, started, clock):
    """The grace ends: the same fire is the recovery it was before."""
    gid, _lease = started()
    alerts.beat()
    clock.advance(minutes=10)
    assert tasks.fire_watchdog(gid, intended_date=clock().isoformat(),
                               kind="requested") == "worker_busy_noop"
    clock.advance(seconds=RECONNECT_GRACE.total_seconds() + 1)
    assert tasks.fire_watchdog(gid, intended_date=clock().isoformat(),
                               kind="requested") == "ready_for_pull"
