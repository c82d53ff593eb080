"""A host that waits inside its own retry for the provider's reset, read from
its stream-json output (wakeledger_agent/hostwait.py, the lines as Claude Code
2.1.332 printed them with CLAUDE_CODE_RETRY_WATCHDOG against
tests/fake_anthropic.py), and what `wakeledger supervise` does with it: the
goal is told (a note: class and reset, no text), and the silence limit counts
from the reset. tests/e2e/test_supervise_live.py runs the real CLI."""

import json
import sys
from datetime import UTC, datetime, timedelta

import pytest

from ledger.domain.failures import RATE_LIMIT, classify
from tests.agent.test_supervise import RunApi, run_within, running_supervisor
from wakeledger_agent import hostwait

NOW = datetime(2026, 12, 7, 15, 21, 23, tzinfo=UTC)
SESSION = "a0b852ba-2455-4176-a795-2deb76345e62"


def api_retry(delay_ms: int, error: str = "rate_limit", status: int | None = 429) -> str:
    return json.dumps({"type": "system", "subtype": "api_retry", "attempt": 1,
                       "max_retries": 300, "retry_delay_ms": delay_ms, "error_status": status,
                       "error": error, "session_id": SESSION, "uuid": "8d77c3d1"})


def rate_limit_event(status: str, resets_at: int) -> str:
    return json.dumps({"type": "rate_limit_event", "uuid": "u", "session_id": SESSION,
                       "rate_limit_info": {"status": status, "resetsAt": resets_at,
                                           "rateLimitType": "five_hour"}})


def test_the_wait_claude_code_announces_before_a_retry():
    wait = hostwait.from_stream_line(api_retry(3 * 3600 * 1000), NOW)
    assert wait == hostwait.ProviderWait(NOW + timedelta(hours=3), RATE_LIMIT)
    # A connection error's retry (no status) with Claude Code's own class, too.
    assert hostwait.from_stream_line(api_retry(60_000, status=None), NOW).until == \
        NOW + timedelta(minutes=1)


def test_a_claude_ai_limit_event_states_its_reset():
    resets = int((NOW + timedelta(hours=2)).timestamp())
    wait = hostwait.from_stream_line(rate_limit_event("rejected", resets), NOW)
    assert wait is not None and wait.until == NOW + timedelta(hours=2)
    assert hostwait.from_stream_line(rate_limit_event("allowed_warning", resets), NOW) is None


@pytest.mark.parametrize("line", [
    api_retry(11_093 // 2),  # a few seconds' backoff: not a wait worth a history line
    api_retry(3_600_000, error="server_error", status=500),  # not the provider's limit
    json.dumps({"type": "assistant", "message": {"content": [
        {"type": "text", "text": '{"type":"system","subtype":"api_retry"}'}]}}),
    '{"type":"system","subtype":"api_retry","retry_delay_ms":true,"error":"rate_limit"}',
    "not json api_retry", "{broken api_retry", "[]", "",
], ids=["short", "server-error", "quoted", "bool", "text", "broken", "list", "empty"])
def test_anything_else_is_no_wait(line):
    assert hostwait.from_stream_line(line, NOW) is None


def test_each_longer_wait_is_reported_once():
    seen = hostwait.Seen()
    assert seen.new(api_retry(3_600_000), NOW) is not None
    assert seen.new(api_retry(3_600_000), NOW) is None  # said again before the next retry
    assert seen.new(api_retry(1_800_000), NOW + timedelta(minutes=1)) is None
    assert seen.new(api_retry(7_200_000), NOW) is not None  # a longer one: news


@pytest.mark.slow  # a real process
def test_a_child_waiting_for_its_provider_is_not_taken_for_hung_and_the_goal_is_told():
    """The child says it waits a minute for the provider, then prints nothing
    for 4 s against a 2 s silence limit (as `claude -p` inside its retry
    watchdog prints nothing for hours): it is not stopped, and the goal got
    the wait as a note before the run's clean end."""
    child = ("import time\n"
             f"print({api_retry(60_000)!r}, flush=True)\n"
             "time.sleep(4)\n"
             "print('{\"type\":\"result\",\"is_error\":false}', flush=True)\n")
    api = RunApi()
    supervisor = running_supervisor(api, silent_limit=2)
    ended = run_within(supervisor, [sys.executable, "-c", child], 30)
    assert (ended.silenced, ended.returncode) == (None, 0)
    reports = [body for method, path, body in api.calls if path.endswith("/runs")]
    assert reports[0] == {"lease": {"token": "wll_x", "generation": 1}, "outcome": "note",
                          "note": "provider_wait", "error_text": "rate limit",
                          "retry_after": "2026-12-02T09:01:00+00:00"}
    assert classify(reports[0]["error_text"]) == RATE_LIMIT
    assert reports[-1]["outcome"] == "ok"
    assert any("waits for its provider until 2026-12-02T09:01:00" in text
               for text, _ in supervisor.progress.said)
