"""A continuation whose host has no saved chat (wakeledger_agent/sessions.py):
Gemini CLI saves a chat only once a request succeeds, so after a run that
failed on its first request `gemini --resume` answers "No previous sessions
found" and exits 1. `wakeledger supervise` then starts a new session with the
same resume packet, and the goal's history says so (a new_session note),
instead of reporting an unknown failure that blocks the goal. Gemini CLI is
not installed here: a script prints what it prints."""

import sys
import threading

import pytest

from tests.agent.test_supervise import RunApi, running_supervisor
from wakeledger_agent import sessions
from wakeledger_agent.child import Interrupts
from wakeledger_agent.supervise import Options, Supervisor

GEMINI_NO_CHAT = "No previous sessions found for this project."


@pytest.mark.parametrize(("template", "fresh"), [
    (["gemini", "--skip-trust", "--resume", "-p", "{prompt}"],
     ["gemini", "--skip-trust", "-p", "{prompt}"]),
    (["gemini", "-r", "latest", "-p", "{prompt}"], ["gemini", "-p", "{prompt}"]),
    (["gemini", "--resume", "{session_key}", "-p", "{prompt}"], ["gemini", "-p", "{prompt}"]),
    (["gemini", "--resume=3", "-p", "{prompt}"], ["gemini", "-p", "{prompt}"]),
    (["gemini", "-r", "-p", "{prompt}"], ["gemini", "-p", "{prompt}"]),
    # Nothing to resume: no fresh variant (aider keeps its context in the repository).
    (["aider", "--message", "{prompt}", "--yes-always"], None),
], ids=["docs-recipe", "latest", "session-key", "equals", "short", "no-resume"])
def test_the_fresh_command_is_the_resume_command_without_its_resume_flag(template, fresh):
    assert sessions.fresh_command(template) == fresh


def test_what_says_there_was_no_chat_to_resume():
    assert sessions.no_saved_chat(f"Loading…\n{GEMINI_NO_CHAT}")
    assert sessions.no_saved_chat("No previous sessions found")
    assert not sessions.no_saved_chat("Error: 429 RESOURCE_EXHAUSTED")


def test_the_fresh_resume_argv_carries_the_resume_packet():
    opts = Options(workspace="/w", goal_key="k", command=["gemini", "-p", "fix it"],
                   resume_cmd=["gemini", "--skip-trust", "--resume", "-p", "{prompt}"])
    supervisor = Supervisor(RunApi(), None, opts, "http://x/api/v1")
    supervisor.goal_id = "g-1"
    answer = {"resume_packet": {"objective": "Fix the flaky test", "next_actions": ["rerun"]}}
    resumed, fresh = supervisor.resume_argv(answer), supervisor.resume_argv(answer, True)
    assert resumed[:4] == ["gemini", "--skip-trust", "--resume", "-p"]
    assert fresh[:3] == ["gemini", "--skip-trust", "-p"] and fresh[3] == resumed[4]
    assert "g-1" in fresh[3]


def run_resume(supervisor, argv, fresh, seconds=30):
    """run_once of a continuation (its fresh variant given), in a thread with a deadline."""
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault(
        "ended", supervisor.run_once(argv, Interrupts(), fresh)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the run did not end within {seconds} s"
    return result["ended"]


def reports(api):
    return [body for _, path, body in api.calls if path.endswith("/runs")]


@pytest.mark.slow  # real processes
def test_a_resume_with_no_saved_chat_starts_a_new_session_and_says_so(tmp_path):
    marker = tmp_path / "fresh-ran"
    resume = [sys.executable, "-c", f"import sys; print({GEMINI_NO_CHAT!r}); sys.exit(1)"]
    fresh = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('the packet')"]
    api = RunApi()
    supervisor = running_supervisor(api, silent_limit=0)
    ended = run_resume(supervisor, resume, fresh)
    assert ended.returncode == 0 and marker.read_text() == "the packet"
    assert [(r["outcome"], r.get("note")) for r in reports(api)] == [
        ("note", "new_session"), ("ok", None)]
    assert any("a new session" in text for text, _ in supervisor.progress.said)


@pytest.mark.slow  # real processes
def test_any_other_failed_resume_is_reported_as_before():
    api = RunApi()
    supervisor = running_supervisor(api, silent_limit=0)
    failing = [sys.executable, "-c", "import sys; print('Segmentation fault'); sys.exit(1)"]
    never = [sys.executable, "-c", "raise SystemExit('the fresh command must not run')"]
    ended = run_resume(supervisor, failing, never)
    assert ended.returncode == 1
    assert [r["outcome"] for r in reports(api)] == ["error"]
