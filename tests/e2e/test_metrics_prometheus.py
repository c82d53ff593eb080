"""A real Prometheus (Debian's ``prometheus``, installed by `make tools`)
scrapes /metrics of a live server with the scrape token, and evaluates the
rule file that ships in docs/prometheus/ — that very file, checked by
``promtool check rules`` first. The sweeper's silence fires its alert; a goal
that needs a human makes the 15-minute rule pending; the log's alarm fires
its own."""

import json
import shutil
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from django.db import connection
from django.test import override_settings

from ledger.domain import GoalState
from ledger.domain.runs import ReportRun
from ledger.eventstore import store
from ledger.log import sealer_state
from ledger.services import alerts
from tests.factories import GoalFactory, proof_of
from tests.helpers import wait_for

RULES = Path(__file__).resolve().parents[2] / "docs" / "prometheus" / "wakeledger.rules.yml"
SCRAPE_TOKEN = "prometheus-scrape-token-for-the-test-0123"

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def tools():
    if connection.vendor != "sqlite":
        pytest.skip("the real Prometheus test runs once, in the SQLite half of the suite")
    found = shutil.which("prometheus"), shutil.which("promtool")
    if not all(found):
        pytest.skip("Debian's prometheus is not installed (`make tools` installs it as root)")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Straight to 127.0.0.1, whatever proxy the environment names.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def api(url: str) -> dict | None:
    """Prometheus' HTTP API answer, or None while it is not listening or
    not ready yet (503)."""
    try:
        with _DIRECT.open(url, timeout=5) as answer:
            return json.load(answer)["data"]
    except ConnectionError:
        return None
    except urllib.error.HTTPError as error:
        if error.code == 503:
            return None
        raise
    except urllib.error.URLError as error:
        if isinstance(error.reason, ConnectionError):
            return None
        raise


def alerts_of(base: str) -> dict[str, str]:
    """{alert name: state} as Prometheus' rule evaluation has them now."""
    found = api(f"{base}/api/v1/alerts") or {"alerts": []}
    return {alert["labels"]["alertname"]: alert["state"] for alert in found["alerts"]}


def query(base: str, expr: str) -> list[dict]:
    found = api(f"{base}/api/v1/query?query={urllib.parse.quote(expr)}")
    return found["result"] if found else []


def test_promtool_accepts_the_shipped_rules(tools):
    done = subprocess.run([tools[1], "check", "rules", str(RULES)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 6 rules found" in done.stdout


def test_a_real_prometheus_scrapes_and_fires_the_sweeper_rule(tools, live_server, clock,
                                                              tmp_path, sealer_record):
    goal = GoalFactory(goal_key="stuck-build", checkpoints=1)
    store.execute(goal.pk, ReportRun(proof_of(GoalState.from_dict(goal.state)), "error",
                                     "unclassified"), actor="agent-1")
    alerts.beat()  # the sweeper has just swept
    host, port = live_server.thread.host, live_server.thread.port
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [{
            "job_name": "wakeledger", "metrics_path": "/metrics",
            "authorization": {"type": "Bearer", "credentials": SCRAPE_TOKEN},
            "static_configs": [{"targets": [f"{host}:{port}"]}]}]}))
    web = f"127.0.0.1:{free_port()}"
    base = f"http://{web}"
    with override_settings(WAKELEDGER_METRICS_TOKEN=SCRAPE_TOKEN), \
            (tmp_path / "prometheus.log").open("w") as log:
        prometheus = subprocess.Popen(
            [tools[0], f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address={web}"], stdout=log, stderr=subprocess.STDOUT)
        try:
            # Scraped (up == 1) and the goal's blocked status arrived.
            wait_for(lambda: any(r["value"][1] == "1" for r in query(base, "up")),
                     timeout=60, what="Prometheus to scrape /metrics")
            blocked = wait_for(lambda: query(base, 'wakeledger_goals{status="blocked"}'),
                               timeout=30, what="the goals metric")
            assert blocked[0]["value"][1] == "1"
            # A goal needs a human: the 15-minute rule is pending, nothing fires.
            wait_for(lambda: alerts_of(base).get("WakeLedgerGoalsNeedAHuman") == "pending",
                     timeout=30, what="the goals rule to be pending")
            assert "WakeLedgerSweeperSilent" not in alerts_of(base)
            # Five minutes without a sweep (the ledger's clock, read at scrape time).
            clock.advance(minutes=5)
            wait_for(lambda: alerts_of(base).get("WakeLedgerSweeperSilent") == "firing",
                     timeout=30, what="the sweeper rule to fire")
            assert alerts_of(base)["WakeLedgerGoalsNeedAHuman"] == "pending"
            # The log's alarm (the sealer's, kept beside its key) pages at once.
            assert "WakeLedgerLogAlarm" not in alerts_of(base)
            sealer_state.raise_alarm("a sealed event no longer matches its leaf (test)")
            wait_for(lambda: alerts_of(base).get("WakeLedgerLogAlarm") == "firing",
                     timeout=30, what="the log alarm rule to fire")
        finally:
            prometheus.terminate()
            prometheus.wait(timeout=30)
    assert "error" not in (tmp_path / "prometheus.log").read_text().lower().replace(
        "err=null", "")
