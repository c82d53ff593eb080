"""GET /api/v1/health over real HTTP: what it says of the scheduler."""

import json
import urllib.request
from datetime import timedelta

import pytest

from ledger.services import alerts

pytestmark = pytest.mark.django_db(transaction=True)


def health(live_server) -> dict:
    url = f"{live_server.url}/api/v1/health"
    with urllib.request.urlopen(url, timeout=30) as answer:  # noqa: S310 (the live server)
        assert answer.status == 200
        return json.loads(answer.read())


def test_health_is_never_ok_on_a_last_sweep_dated_in_the_future(live_server, clock):
    """The clock ran two hours ahead while the sweeper beat, then was set back:
    "now - last sweep" is negative, which is no evidence that anything swept
    since. The web tier stays healthy; the scheduler reads silent."""
    real = clock()
    alerts.beat()
    assert health(live_server)["scheduler"]["status"] == "ok"
    clock.current = real + timedelta(hours=2)
    alerts.beat()
    clock.current = real + timedelta(minutes=2, seconds=30)
    body = health(live_server)
    assert body["status"] == "ok"
    assert body["scheduler"]["status"] == "silent"
    # Within the skew bound of several hosts' clocks, a beat a little ahead is fresh.
    clock.current = real + timedelta(hours=2) - timedelta(seconds=30)
    assert health(live_server)["scheduler"]["status"] == "ok"
