"""Structured logs (docs/configuration.md, WAKELEDGER_LOG_FORMAT): JSON lines
when asked, strictly parsed, redacted like the text ones, and a request id
that follows a request through the store and the outbox to its dispatch."""

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from ledger.project import middleware, requestid
from ledger.project.jsonlogs import JsonLines
from ledger.project.redact import RedactSecrets
from scheduling import outbox
from scheduling.models import Dispatch
from tests.factories import lease_of

ROOT = Path(__file__).resolve().parents[2]
LEAKED = "wl_abcdefgh_0123456789abcdef"


@pytest.fixture
def json_log():
    """The console handler as WAKELEDGER_LOG_FORMAT=json builds it, on the root logger."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonLines())
    handler.addFilter(requestid.RequestIdFilter())
    handler.addFilter(RedactSecrets())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def settings_process(fmt: str, code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "ledger.project.settings",
           "WAKELEDGER_LOG_FORMAT": fmt, "SECRET_KEY": "request-id-test-" + "k" * 40,
           "PYTHONPATH": str(ROOT)}
    env.pop("DATABASE_URL", None)
    return subprocess.run([sys.executable, "-c", "import django; django.setup()\n" + code],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
                          check=False)


def test_the_setting_chooses_json_lines_and_is_strict():
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("three processes that read settings only: run once, in the SQLite half")
    code = ("import logging\n"
            f"logging.getLogger('wakeledger.test').warning('token %s', {LEAKED!r})\n")
    done = settings_process("json", code)
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stderr.strip().splitlines()[-1])
    assert line["logger"] == "wakeledger.test" and line["level"] == "WARNING"
    assert line["request_id"] == "-"
    assert LEAKED not in done.stderr and "[redacted]" in line["message"]
    text = settings_process("text", code)
    assert text.returncode == 0 and LEAKED not in text.stderr
    assert "WARNING wakeledger.test [-] token [redacted]" in text.stderr
    wrong = settings_process("JSON ", "")
    assert wrong.returncode != 0
    assert "WAKELEDGER_LOG_FORMAT='JSON ' must be text or json" in wrong.stderr


def test_extra_attributes_are_redacted_in_json_too(json_log):
    """Django's django.request passes the request, whose text holds the query string."""
    logging.getLogger("wakeledger.test").warning(
        "refused", extra={"request": f"<WSGIRequest: GET '/api/v1/goals?token={LEAKED}'>"})
    line, = json_log()
    assert LEAKED not in json.dumps(line)
    assert "token=[redacted]" in line["request"]


@pytest.mark.parametrize(("sent", "kept"), [
    ("req-2026-12-07.abc:1", True), ("a" * 64, True), ("a" * 65, False),
    ("has space", False), ("quote\"d", False), ("", False), ("-leading", False)])
def test_an_incoming_request_id_is_kept_only_when_well_formed(sent, kept):
    found = middleware.accepted(sent)
    assert (found == sent) is kept
    assert len(found) <= 64


@pytest.mark.django_db
def test_a_request_is_followed_to_its_dispatch_by_its_id(agent, operator, clock, settings,
                                                         tmp_path, json_log):
    settings.WAKELEDGER_DISPATCHERS = {"cmd": {"type": "command", "argv": ["/bin/true"]}}
    settings.WAKELEDGER_RUNS_DIR = tmp_path / "runs"
    body = agent.start(policy={"dispatch": "cmd", "lease_seconds": 300}).json()
    gid = body["goal"]["id"]
    agent.post(f"goals/{gid}/lease/release", {"lease": lease_of(body)})

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {operator.token}")
    answer = client.post(f"/api/v1/goals/{gid}/wake", {"reason": "try again now"},
                         format="json", HTTP_X_REQUEST_ID="req-follow-me-1")
    assert answer.status_code in (200, 201, 202), answer.content
    assert answer["X-Request-ID"] == "req-follow-me-1"
    row = Dispatch.objects.get(goal_id=gid)
    assert row.request_id == "req-follow-me-1"
    assert requestid.current() == ""  # the request is over

    # Later, outside the request: the sweeper sends what waits in the outbox.
    assert outbox.send_pending() == 1
    lines = [line for line in json_log() if line["request_id"] == "req-follow-me-1"]
    queued = [line for line in lines if "in the outbox" in line["message"]]
    sent = [line for line in lines if line["message"].endswith("sent (ok)")
            or ": sent (" in line["message"]]
    assert queued and sent, lines
    assert queued[0]["logger"] == sent[0]["logger"] == "scheduling.outbox"
    # A generated id when the request brings none (or a bad one).
    other = client.get("/api/v1/alerts", HTTP_X_REQUEST_ID="bad id")
    assert other["X-Request-ID"] != "bad id" and len(other["X-Request-ID"]) == 32


def test_django_q2s_routine_is_debug_and_its_cluster_life_and_alarms_stay(caplog):
    """An idle server's django-q2 lines (a task enqueued, created from a
    schedule, processing, processed: eight a minute) are DEBUG; the cluster
    starting, running, stopping, and every warning or error stay."""
    q = logging.getLogger("django-q")
    with caplog.at_level(logging.INFO):
        q.info("Enqueued [wakeledger] 7")
        q.info("Process-1 created task x from schedule [wakeledger-lease-sweeper]")
        q.info("Processed 'scheduling.tasks.sweep_leases' (x)")
        q.info("Q Cluster oxygen-kilo [wakeledger] running.")
        q.error("Failed 'scheduling.tasks.sweep_leases' (x) - boom")
        q.critical("reincarnated worker Process-1 after death")
    assert [(r.levelname, r.getMessage()[:20]) for r in caplog.records] == [
        ("INFO", "Q Cluster oxygen-kil"), ("ERROR", "Failed 'scheduling.t"),
        ("CRITICAL", "reincarnated worker ")]
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        q.info("Enqueued [wakeledger] 8")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("DEBUG", "Enqueued [wakeledger] 8")]


@pytest.mark.django_db
def test_a_bad_host_header_is_one_warning_line(client, caplog):
    with caplog.at_level(logging.INFO, logger="django.security"):
        answer = client.get("/api/v1/health", HTTP_HOST="evil.example")
    assert answer.status_code == 400
    [record] = [r for r in caplog.records if r.name.startswith("django.security")]
    assert record.levelname == "WARNING" and record.exc_info is None
    assert "Invalid HTTP_HOST header: 'evil.example'" in record.getMessage()
