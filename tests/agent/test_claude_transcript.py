"""Reading how a Claude Code turn ended from the session's JSONL transcript
(wakeledger_agent/claude_transcript.py), on files shaped like the ones Claude
Code 2.1.197 and 2.1.332 wrote (recorded against tests/fake_anthropic.py).
No server: tests/agent/test_claude_code_hooks.py and tests/e2e/test_claude_code_live.py run
the reports."""

import json
from datetime import UTC, datetime, timedelta

from wakeledger_agent import claude_transcript as transcript
from wakeledger_agent.leases import FileLeases

AT = "2026-12-07T03:46:13.512Z"
ERROR = {"parentUuid": "d0f7", "isSidechain": False, "type": "assistant", "uuid": "e-1",
         "timestamp": AT, "error": "rate_limit", "isApiErrorMessage": True,
         "apiErrorStatus": 429, "message": {"role": "assistant", "model": "<synthetic>",
                                            "content": [{"type": "text", "text":
                                                         "API Error: Request rejected (429) "
                                                         "· You've hit your limit · resets "
                                                         "3am (Europe/Istanbul)"}]}}
USER = {"type": "user", "uuid": "u-1", "isSidechain": False, "timestamp": AT,
        "message": {"role": "user", "content": "Build it"}}
# What 2.1.332 writes after the error: bookkeeping entries, not turns.
TRAILER = [{"type": "last-prompt", "lastPrompt": "Build it"},
           {"type": "cost-state", "totalCostUSD": 0}]


def write(path, *entries, garbage: str = "") -> str:
    path.write_text(garbage + "".join(json.dumps(e) + "\n" for e in entries))
    return str(path)


def test_a_failed_turn_is_read_with_its_class_text_and_time(tmp_path):
    end = transcript.last_turn_end(write(tmp_path / "s.jsonl", USER, ERROR, *TRAILER))
    assert end is not None and end.failed and end.uuid == "e-1"
    assert end.error == "rate_limit" and "resets 3am" in end.text
    assert end.at == datetime(2026, 12, 7, 3, 46, 13, 512000, tzinfo=UTC)


def test_a_clean_turn_a_subagent_or_nothing_is_no_failure(tmp_path):
    answer = {**ERROR, "uuid": "a-2", "isApiErrorMessage": False, "error": None,
              "message": {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}}
    end = transcript.last_turn_end(write(tmp_path / "a.jsonl", ERROR, answer))
    assert end is not None and not end.failed and end.text == ""
    # A subagent's error is not the session's end; the main thread's last entry is.
    side = {**ERROR, "uuid": "s-3", "isSidechain": True}
    assert transcript.last_turn_end(write(tmp_path / "b.jsonl", answer, side)).uuid == "a-2"
    # The user's next prompt after a failed turn: that turn is history.
    assert not transcript.last_turn_end(write(tmp_path / "c.jsonl", ERROR, USER)).failed
    assert transcript.last_turn_end(str(tmp_path / "missing.jsonl")) is None
    assert transcript.last_turn_end("") is None
    assert transcript.last_turn_end(write(tmp_path / "d.jsonl", *TRAILER)) is None


def test_only_the_tail_of_a_long_transcript_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(transcript, "TAIL_BYTES", 4096)
    filler = {"type": "attachment", "rendered": "x" * 3000}
    path = write(tmp_path / "long.jsonl", *[filler] * 50, USER, ERROR,
                 garbage="{not json\n")
    assert transcript.last_turn_end(path).uuid == "e-1"


def test_an_end_is_accounted_for_once(tmp_path):
    leases = FileLeases(tmp_path / "state")
    path = write(tmp_path / "s.jsonl", USER, ERROR)
    assert transcript.unreported(leases, "sess-1", path).uuid == "e-1"
    transcript.account(leases, "sess-1", "e-1")
    assert transcript.unreported(leases, "sess-1", path) is None
    assert transcript.unreported(leases, "sess-2", path) is not None  # per session
    assert transcript.accounted(leases, "../escape") == ""  # no path outside the store


def test_a_reset_is_read_from_when_the_limit_was_met(tmp_path):
    end = transcript.last_turn_end(write(tmp_path / "s.jsonl", ERROR))
    met = end.at  # 06:46 in Istanbul: "resets 3am" is 00:00 UTC the next day
    assert transcript.still_ahead(end, met + timedelta(hours=20), "UTC")
    assert not transcript.still_ahead(end, met + timedelta(hours=21), "UTC")
    auth = transcript.TurnEnd("x", met, True, "authentication_failed", "Invalid API key")
    assert not transcript.still_ahead(auth, met, "UTC")


def test_the_session_claude_run_reports_for():
    named = transcript._named_session
    assert named(["claude", "--resume", "abc", "-p", "go"]) == "abc"
    assert named(["claude", "-r", "abc"]) == "abc"
    assert named(["claude", "--session-id=abc", "-p", "go"]) == "abc"
    assert named(["claude", "-p", "go"]) == ""
    assert named(["claude", "--resume", "-p", "go"]) == ""  # the picker, no id


def test_claude_run_settles_only_a_session_started_in_its_own_directory(tmp_path):
    leases = FileLeases(tmp_path / "state")
    transcript.remember_transcript(leases, "sess-1", str(tmp_path / "s.jsonl"), "/srv/shop")
    assert transcript.transcript_of(leases, "sess-1") == str(tmp_path / "s.jsonl")
    assert transcript._started_session(leases, 0, "/srv/shop") == "sess-1"
    # Another project's session, started meanwhile: still running, not ours.
    assert transcript._started_session(leases, 0, "/srv/other") == ""
    # Started before this run: an earlier run's session.
    later = (tmp_path / "state" / "last-session").stat().st_mtime + 60
    assert transcript._started_session(leases, later, "/srv/shop") == ""


# The main thread calling a subagent: the turn is going on (recorded from 2.1.332).
AGENT_CALL = {"parentUuid": "u-1", "isSidechain": False, "type": "assistant", "uuid": "a-1",
              "timestamp": AT, "message": {"role": "assistant", "content": [
                  {"type": "tool_use", "id": "toolu_1", "name": "Agent",
                   "input": {"prompt": "side task", "model": "haiku"}}]}}


def test_whose_failure_a_stop_failure_reports(tmp_path):
    """A subagent's (agent_id set: Claude Code sets it only from within one),
    a helper query's (the main thread's last entry is no API error: the turn
    goes on), or the main turn's own (its failed end is the last entry, or
    there is no transcript to tell)."""
    going_on = transcript.last_turn_end(write(tmp_path / "a.jsonl", USER, AGENT_CALL))
    ended = transcript.last_turn_end(write(tmp_path / "b.jsonl", USER, ERROR, *TRAILER))
    subagent = {"agent_id": "af5d9e94bd22a3344", "agent_type": "general-purpose"}
    assert transcript.failure_scope(subagent, going_on) == "subagent_failure"
    assert transcript.failure_scope(subagent, ended) == "subagent_failure"
    assert transcript.failure_scope(subagent, None) == "subagent_failure"
    assert transcript.failure_scope({}, going_on) == "helper_failure"
    assert transcript.failure_scope({"agent_id": ""}, going_on) == "helper_failure"
    assert transcript.failure_scope({}, ended) == ""
    assert transcript.failure_scope({}, None) == ""


# What 2.1.332 writes while its retry watchdog waits (recorded; the provider's
# message is in error.message, never read here).
RETRYING = {"parentUuid": "u-1", "isSidechain": False, "type": "system", "subtype": "api_error",
            "level": "error", "uuid": "r-1", "timestamp": AT, "retryInMs": 3 * 3600 * 1000,
            "retryAttempt": 1, "maxRetries": 300, "source": "request_retry",
            "error": {"message": "429 {…}", "status": 429, "formatted": "429 …",
                      "rateLimits": {"rateLimitType": "five_hour", "resetsAt": 1796656895}}}
LATCH = {"type": "atis-latch", "atis": ""}


def test_a_wait_inside_the_retry_watchdog_is_read_until_the_retry(tmp_path):
    wait = transcript.provider_wait(write(tmp_path / "w.jsonl", USER, RETRYING, LATCH,
                                          *TRAILER))
    assert wait == ("r-1", datetime(2026, 12, 7, 6, 46, 13, 512000, tzinfo=UTC))
    # The conversation went on after the retry: no wait.
    assert transcript.provider_wait(write(tmp_path / "a.jsonl", USER, RETRYING,
                                          AGENT_CALL)) is None
    # A subagent's retry is not the main thread's wait; a 500's retry is no limit.
    assert transcript.provider_wait(write(tmp_path / "s.jsonl", USER,
                                          {**RETRYING, "isSidechain": True})) is None
    assert transcript.provider_wait(write(tmp_path / "e.jsonl", USER, {
        **RETRYING, "error": {"status": 500}})) is None
    assert transcript.provider_wait(None) is None
    assert transcript.provider_wait(tmp_path / "missing.jsonl") is None
