"""`wakeledger hook claude-code` and `wakeledger hooks install|uninstall
claude-code`, driven as Claude Code drives them: a subprocess with one hook
event as JSON on stdin (the payloads Claude Code 2.1 sends, as recorded from
the real CLI), against a live server. tests/e2e/test_claude_code_live.py runs the
real Claude Code CLI itself."""

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ledger.domain.failures import CLASSES, classify, usage_window
from ledger.models import Event, Goal
from tests.helpers import issue_agent_token
from wakeledger_agent import runend

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]  # live server, processes

SESSION = "5e77941c-081d-4da8-8fa3-2b76de4145dc"
PROVIDER_TEXT = "PROVIDER-SECRET-TEXT"


@pytest.fixture
def agent_token(transactional_db):
    return issue_agent_token("claude-code-agent")


class Hooks:
    """Claude Code's side: runs the hook command with one event per call."""

    def __init__(self, url: str, token: str, state: Path, cwd: Path):
        self.env = {**os.environ, "WAKELEDGER_URL": url, "WAKELEDGER_TOKEN": token,
                    "WAKELEDGER_STATE_DIR": str(state)}
        for name in ("WAKELEDGER_GOAL_ID", "WAKELEDGER_LEASE_TOKEN", "WAKELEDGER_TIMEOUT"):
            self.env.pop(name, None)
        self.state, self.cwd = state, cwd
        self.stderr = ""
        self.seconds = 0.0

    def __call__(self, event: str, **fields: object) -> dict:
        payload = {"session_id": SESSION, "cwd": str(self.cwd), "hook_event_name": event,
                   "transcript_path": str(self.cwd / f"{SESSION}.jsonl"), **fields}
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "wakeledger_agent", "hook", "claude-code"],
                              input=json.dumps(payload), env=self.env, capture_output=True,
                              text=True, timeout=60, check=False)
        self.seconds = time.monotonic() - started
        self.stderr = done.stderr
        assert done.returncode == 0, done.stderr  # a hook never stops the session
        return json.loads(done.stdout) if done.stdout.strip() else {}


@pytest.fixture
def hooks(live_server, agent_token, tmp_path):
    workspace = tmp_path / "project"
    workspace.mkdir()
    return Hooks(f"{live_server.url}/api/v1", agent_token, tmp_path / "state", workspace)


def lease_file(hooks: Hooks, goal_id: str) -> Path:
    return hooks.state / "leases" / f"{goal_id}.json"


def test_a_session_from_start_to_a_usage_limit_and_back(hooks, settings):
    settings.WAKELEDGER_RESET_MARGIN_SECONDS = 0
    hooks.env["WAKELEDGER_OBJECTIVE"] = "Port the parser"
    hooks.env["WAKELEDGER_DONE"] = "tests pass\nparser ported"
    started = hooks("SessionStart", source="startup")
    context = started["hookSpecificOutput"]["additionalContext"]
    assert started["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    goal = Goal.objects.get()
    goal_id = str(goal.id)
    assert goal.workspace == str(hooks.cwd) and goal.status == "running"
    assert goal.session_key == SESSION and goal.state["session"]["agent_id"] == "claude-code"
    assert f"Wake Ledger goal {goal_id}" in context and "Port the parser" in context
    assert "Done when: tests pass; parser ported" in context
    assert "checkpoint_goal" in context and "finish_goal" in context
    saved = json.loads(lease_file(hooks, goal_id).read_text())
    assert saved["token"] not in json.dumps(started) + hooks.stderr  # never the lease token

    # A compaction (another SessionStart of the same session) keeps the same goal and lease.
    again = hooks("SessionStart", source="compact")
    assert Goal.objects.count() == 1 and "generation 1" in \
        again["hookSpecificOutput"]["additionalContext"]

    # The usage limit: the class and the reset reach the server, the text does not.
    hooks("StopFailure", error="rate_limit", error_details=f"429 {PROVIDER_TEXT}",
          last_assistant_message=f"API Error: Request rejected (429) · {PROVIDER_TEXT}: "
                                 "try again in 10 minutes")
    goal.refresh_from_db()
    assert goal.status == "paused" and goal.reason == "RATE_LIMITED"
    until = goal.paused_until
    assert timedelta(minutes=9) < until - datetime.now(UTC) <= timedelta(minutes=10, seconds=2)
    assert "paused" in hooks.stderr and PROVIDER_TEXT not in hooks.stderr
    assert not lease_file(hooks, goal_id).exists()  # the report ended the lease
    everything = json.dumps([e.data for e in Event.objects.filter(goal_id=goal_id)])
    assert PROVIDER_TEXT not in everything and "10 minutes" not in everything

    # SessionEnd after the failure has nothing to release; a new session start
    # while paused says so and takes no lease.
    hooks("SessionEnd", reason="other")
    paused = hooks("SessionStart", source="resume")["hookSpecificOutput"]["additionalContext"]
    assert "holds no lease: wait_for_reset" in paused
    refused = hooks("UserPromptSubmit", prompt="go on")["hookSpecificOutput"]
    assert refused["hookEventName"] == "UserPromptSubmit"
    assert "holds no lease: wait_for_reset" in refused["additionalContext"]
    assert not lease_file(hooks, goal_id).exists()


def test_the_end_of_a_turn_releases_the_lease_and_keeps_the_goal(hooks):
    hooks("SessionStart", source="startup")
    goal_id = str(Goal.objects.get().id)
    assert lease_file(hooks, goal_id).exists()
    hooks("Stop", stop_hook_active=False, last_assistant_message="Done.")
    goal = Goal.objects.get()
    assert goal.status == "waiting" and goal.state["lease"] == {}
    kinds = list(Event.objects.filter(goal_id=goal_id).values_list("kind", flat=True))
    assert kinds[-3:] == ["lease.released", "wake.scheduled", "receipt.recorded"]  # armed
    assert not lease_file(hooks, goal_id).exists()
    hooks("SessionEnd", reason="other")  # nothing left to release: no new event
    assert Event.objects.filter(goal_id=goal_id).count() == len(kinds)
    # The next prompt takes the lease again (generation 2), quietly; a second
    # prompt of the same turn asks the server nothing.
    assert hooks("UserPromptSubmit", prompt="go on") == {}
    assert json.loads(lease_file(hooks, goal_id).read_text())["generation"] == 2
    events = Event.objects.filter(goal_id=goal_id).count()
    assert hooks("UserPromptSubmit", prompt="and then") == {}
    assert Event.objects.filter(goal_id=goal_id).count() == events
    assert "generation 2" in hooks("SessionStart", source="resume")[
        "hookSpecificOutput"]["additionalContext"]


LIMIT = {"error": "rate_limit", "error_details": "429",
         "last_assistant_message": "API Error: Request rejected (429): try again in 10 minutes"}


def test_a_usage_limit_reported_after_session_end_still_pauses_the_goal(hooks):
    """Claude Code fires StopFailure without waiting for it and runs SessionEnd
    right after: the release can land first. The failure hook then takes the
    lease back only to report the run, and the goal pauses as it should."""
    hooks("SessionStart", source="startup")
    goal_id = str(Goal.objects.get().id)
    hooks("SessionEnd", reason="other")
    assert Goal.objects.get().status == "waiting"
    hooks("StopFailure", **LIMIT)
    goal = Goal.objects.get()
    assert (goal.status, goal.reason) == ("paused", "RATE_LIMITED"), hooks.stderr
    assert not lease_file(hooks, goal_id).exists()


def test_a_usage_limit_racing_session_end_pauses_the_goal(hooks):
    """Both hooks at once, as Claude Code runs them: whichever wins the goal's
    lease lock, the limit is recorded and no lease is left behind."""
    hooks("SessionStart", source="startup")
    goal_id = str(Goal.objects.get().id)
    with ThreadPoolExecutor(max_workers=2) as pool:
        ends = [pool.submit(hooks, "StopFailure", **LIMIT),
                pool.submit(hooks, "SessionEnd", reason="other")]
        for end in ends:
            end.result()
    goal = Goal.objects.get()
    assert (goal.status, goal.reason) == ("paused", "RATE_LIMITED")
    assert goal.state["lease"] == {} and not lease_file(hooks, goal_id).exists()


def test_a_late_failure_never_takes_a_lease_another_holder_has(hooks, agent_token):
    """The report is not ours to make once someone else holds the goal (here a
    second window took the lease between SessionEnd and StopFailure): nothing
    is recorded and that holder keeps its lease."""
    from rest_framework.test import APIClient

    hooks("SessionStart", source="startup")
    goal_id = str(Goal.objects.get().id)
    hooks("SessionEnd", reason="other")
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_token}")
    taken = other.post(f"/api/v1/goals/{goal_id}/lease", {}, format="json").json()
    assert taken["acquired"] and taken["lease"]["generation"] == 2
    events = Event.objects.filter(goal_id=goal_id).count()
    hooks("StopFailure", **LIMIT)
    goal = Goal.objects.get()
    assert goal.status == "running" and goal.state["lease"]["generation"] == 2
    assert Event.objects.filter(goal_id=goal_id).count() == events
    assert "no lease to report the run with" in hooks.stderr
    assert not lease_file(hooks, goal_id).exists()


def test_a_dispatched_session_adopts_the_lease_of_its_wake(hooks, agent_token, live_server):
    hooks("SessionStart", source="startup")
    goal_id = str(Goal.objects.get().id)
    lease = json.loads(lease_file(hooks, goal_id).read_text())
    lease_file(hooks, goal_id).unlink()
    # What the command dispatcher sets: the goal and the lease its wake granted.
    hooks.env.update(WAKELEDGER_GOAL_ID=goal_id, WAKELEDGER_LEASE_TOKEN=lease["token"],
                     WAKELEDGER_LEASE_GENERATION=str(lease["generation"]))
    hooks.env.pop("WAKELEDGER_TOKEN")
    token_file = hooks.state / "token"
    token_file.write_text(agent_token)
    token_file.chmod(0o644)
    hooks("SessionStart", source="resume")
    assert "readable by others" in hooks.stderr  # a shared token file is refused, exit 0
    token_file.chmod(0o600)
    context = hooks("SessionStart", source="resume")["hookSpecificOutput"]["additionalContext"]
    assert f"generation {lease['generation']}" in context and lease["token"] not in context
    assert json.loads(lease_file(hooks, goal_id).read_text())["token"] == lease["token"]
    assert Goal.objects.count() == 1


CLEARED = "7a1c0b6e-1111-4222-8333-444455556666"  # the session id /clear starts


def test_clear_in_a_bound_workspace_says_the_session_is_not_tracked(hooks):
    """/clear ends the session (SessionEnd, reason "clear") and starts another
    with a new id. Its default goal key is new, but the workspace is still bound
    to the cleared conversation's goal, which keeps its watchdog: the new
    session is told, in the context the model reads, that it is not tracked and
    how to carry on; nothing is recorded for it and the old goal is unchanged."""
    hooks("SessionStart", source="startup")
    hooks("SessionEnd", reason="clear")
    events = Event.objects.count()
    started = hooks("SessionStart", source="clear", session_id=CLEARED)["hookSpecificOutput"]
    assert started["hookEventName"] == "SessionStart"
    context = started["additionalContext"]
    assert context.startswith("Wake Ledger does not track this session: ")
    assert "workspace_bound" in context
    assert "WAKELEDGER_GOAL_KEY" in context and f"--workspace {hooks.cwd}" in context
    assert "not tracked" in hooks.stderr and hooks.stderr.count("\n") == 1
    old = Goal.objects.get()
    assert old.session_key == SESSION and old.status == "waiting"
    assert old.state["watchdog"]["schedule_name"]  # armed: a wake resumes the old session
    assert Event.objects.count() == events
    assert hooks("UserPromptSubmit", session_id=CLEARED, prompt="go on") == {}
    assert hooks("Stop", session_id=CLEARED) == {} and Event.objects.count() == events


def test_claude_run_names_the_goal_that_holds_the_folder_when_the_hook_declined(hooks):
    """`wakeledger claude-run` learns what the SessionStart hook did from the
    state folder. When the hook ran and declined the session (the folder is
    bound to another of the agent's goals), its last line names that goal,
    not "no SessionStart hook ran"."""
    hooks.env["WAKELEDGER_GOAL_KEY"] = "port-the-parser"
    hooks("SessionStart", source="startup")
    hooks("SessionEnd", reason="clear")
    held = Goal.objects.get()
    # The first session's record is from before this run (claude-run allows a
    # second for the file system's clock), as it is when a person runs it.
    os.utime(hooks.state / "last-session", (time.time() - 60, time.time() - 60))
    # The stand-in for `claude`: a session whose SessionStart hook runs as
    # Claude Code runs it, in the same folder, under a key of its own.
    event = json.dumps({"session_id": CLEARED, "cwd": str(hooks.cwd),
                        "hook_event_name": "SessionStart", "source": "startup"})
    claude = [sys.executable, "-c",
              "import subprocess, sys; subprocess.run([sys.executable, '-m', "
              "'wakeledger_agent', 'hook', 'claude-code'], input=sys.argv[1], text=True, "
              "check=True, stdout=subprocess.DEVNULL)", event]
    env = {**hooks.env, "WAKELEDGER_GOAL_KEY": "another-key"}
    done = subprocess.run([sys.executable, "-m", "wakeledger_agent", "claude-run", "--", *claude],
                          cwd=hooks.cwd, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "no SessionStart hook ran" not in done.stderr
    assert last.startswith("wakeledger hook: claude-run: the session was not tracked: ")
    assert f"'port-the-parser' ({str(held.id)[:8]})" in last and str(hooks.cwd) in last
    assert Goal.objects.count() == 1


def test_clear_under_a_fixed_goal_key_keeps_the_goal_and_a_limit_asks_a_human(hooks):
    """With WAKELEDGER_GOAL_KEY the new session attaches to the same goal and
    takes its lease, but the goal stays registered to the first session (the
    one a wake resumes): a run the new session reports is a changed session,
    which blocks for a human (SESSION_CHANGED) rather than pausing and later
    resuming a conversation that was cleared."""
    hooks.env["WAKELEDGER_GOAL_KEY"] = "port-the-parser"
    hooks("SessionStart", source="startup")
    hooks("SessionEnd", reason="clear")
    context = hooks("SessionStart", source="clear", session_id=CLEARED)[
        "hookSpecificOutput"]["additionalContext"]
    goal = Goal.objects.get()
    assert "holds the goal's lease (generation 2)" in context
    assert goal.session_key == SESSION
    hooks("StopFailure", session_id=CLEARED, error="rate_limit",
          last_assistant_message=f"{PROVIDER_TEXT}: try again in 10 minutes")
    goal.refresh_from_db()
    assert (goal.status, goal.reason) == ("blocked", "SESSION_CHANGED")
    assert PROVIDER_TEXT not in json.dumps(list(Event.objects.values_list("data", flat=True)))


@pytest.mark.parametrize(("error", "text", "status", "reason"), [
    ("authentication_failed", f"401 {PROVIDER_TEXT} invalid x-api-key", "failed",
     "AUTH_FAILED"),
    ("unknown", f"{PROVIDER_TEXT} something else broke", "blocked", "UNCLASSIFIED"),
])
def test_other_failures_are_reported_by_class(hooks, error, text, status, reason):
    hooks("SessionStart", source="startup")
    hooks("StopFailure", error=error, last_assistant_message=text)
    goal = Goal.objects.get()
    assert (goal.status, goal.reason) == (status, reason)
    assert PROVIDER_TEXT not in json.dumps(list(Event.objects.values_list("data", flat=True)))


def test_a_server_that_is_down_costs_the_session_nothing(tmp_path):
    hooks = Hooks("http://127.0.0.1:9/api/v1", "wl_x", tmp_path / "state", tmp_path)
    for event in ("SessionStart", "UserPromptSubmit", "StopFailure", "Stop", "SessionEnd"):
        assert hooks(event, error="rate_limit") == {}
    hooks.env["WAKELEDGER_TOKEN"] = "wl_do-not-print-me"
    hooks("SessionStart", source="startup")
    # A bound must stay here, as the behaviour is "never holds up the session":
    # a refused connection is answered at once, so a generous 20 s still fails
    # a hook that retries or backs off, without timing the machine.
    assert hooks.seconds < 20, hooks.seconds
    assert hooks.stderr.count("\n") == 1 and "cannot reach" in hooks.stderr
    assert "do-not-print-me" not in hooks.stderr


@pytest.mark.parametrize("stdin", ["", "not json", "[1, 2]", '{"hook_event_name": '
                                   '"SessionStart"}'])
def test_bad_input_is_one_line_and_exit_0(tmp_path, stdin):
    done = subprocess.run([sys.executable, "-m", "wakeledger_agent", "hook", "claude-code"],
                          input=stdin, capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "WAKELEDGER_URL": "http://127.0.0.1:9",
                               "WAKELEDGER_TOKEN": "x",
                               "WAKELEDGER_STATE_DIR": str(tmp_path)})
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr.startswith("wakeledger hook: ") and "Traceback" not in done.stderr


def test_the_phrases_sent_are_read_back_as_their_class():
    assert set(runend.PHRASES) == set(CLASSES)
    for kind, phrase in runend.PHRASES.items():
        assert classify(phrase) == kind
    now = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
    body = runend.run_report("rate_limit", "Request rejected (429) · try again in 90 seconds",
                             now=now)
    assert body == {"outcome": "error", "error_text": "rate limit",
                    "retry_after": "2026-12-04T10:01:30+00:00"}
    # Claude Code's own error value decides before the words do.
    assert runend.failure_class("authentication_failed", "rate limit") == "auth"
    assert runend.failure_class("unknown", "OAuth token has expired") == "auth"
    assert runend.run_report("server_error", "boom", now=now)["retry_after"] == ""
    # A usage window travels as its own phrase: the server picks the long backoff.
    assert classify(runend.USAGE_PHRASE) == "rate_limit" and usage_window(runend.USAGE_PHRASE)
    assert not usage_window(runend.PHRASES["rate_limit"])
    assert runend.run_report("rate_limit", "You've hit your limit",
                             now=now)["error_text"] == runend.USAGE_PHRASE
    assert runend.run_report("rate_limit", "API Error: Request rejected (429) · try again "
                             "later", now=now)["error_text"] == "rate limit"


def wakeledger(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wakeledger_agent", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False)


def test_install_merges_idempotently_and_uninstall_removes_only_ours(tmp_path):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"model": "opus", "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}]}}
    settings.write_text(json.dumps(mine))
    first = wakeledger("hooks", "install", "claude-code", "--project", str(tmp_path),
                       cwd=tmp_path)
    assert first.returncode == 0 and first.stdout.startswith("--- a/")
    assert '+            "command": ' in first.stdout and "hook claude-code" in first.stdout
    installed = json.loads(settings.read_text())
    for event in ("SessionStart", "UserPromptSubmit", "StopFailure", "Stop", "SessionEnd"):
        ours = [h for g in installed["hooks"][event] for h in g["hooks"]
                if h["command"].endswith("hook claude-code")]
        assert len(ours) == 1 and ours[0]["timeout"] == 30
    assert installed["hooks"]["Stop"][0] == mine["hooks"]["Stop"][0]  # theirs kept, first
    assert installed["hooks"]["PreToolUse"] == mine["hooks"]["PreToolUse"]
    assert installed["model"] == "opus"

    second = wakeledger("hooks", "install", "claude-code", cwd=tmp_path)  # the default: cwd
    assert second.returncode == 0 and second.stdout.strip().endswith("no change")
    assert json.loads(settings.read_text()) == installed

    removed = wakeledger("hooks", "uninstall", "claude-code", "--project", str(tmp_path),
                         cwd=tmp_path)
    assert removed.returncode == 0 and removed.stdout.startswith("--- a/")
    assert json.loads(settings.read_text()) == mine


def test_install_refuses_settings_it_cannot_read(tmp_path):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{not json")
    done = wakeledger("hooks", "install", "claude-code", cwd=tmp_path)
    assert done.returncode == 2 and "is not JSON" in done.stderr
    assert "Traceback" not in done.stderr and settings.read_text() == "{not json"
    user = wakeledger("hooks", "install", "claude-code", "--user", "--project", ".",
                      cwd=tmp_path)
    assert user.returncode == 2  # one place at a time


def test_the_mcp_server_with_shared_leases_uses_the_lease_the_hook_took(hooks):
    """`wakeledger mcp --share-leases`: the tools fence with the hook's lease
    (no resume_goal first), the answers never show it, and the end of the turn
    finds the checkpoint's release already done."""
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    hooks("SessionStart", source="startup")
    goal_id = str(Goal.objects.get().id)
    token = json.loads(lease_file(hooks, goal_id).read_text())["token"]
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "wakeledger_agent", "mcp", "--share-leases"],
        env={name: hooks.env[name] for name in
             ("WAKELEDGER_URL", "WAKELEDGER_TOKEN", "WAKELEDGER_STATE_DIR")})
    texts: list[str] = []

    async def scenario() -> None:
        async with Client(stdio_client(params)) as client:
            done = await client.call_tool("checkpoint_goal", {
                "goal_id": goal_id, "current_step": "parsed", "progress_pct": 50,
                "release_lease": True})
            texts.extend(block.text for block in done.content)
            assert not done.is_error, texts

    anyio.run(scenario)
    assert token not in "".join(texts)
    assert not lease_file(hooks, goal_id).exists()  # released, and forgotten in the files
    hooks("Stop", stop_hook_active=False)
    kinds = list(Event.objects.filter(goal_id=goal_id).values_list("kind", flat=True))
    assert kinds.count("lease.released") == 1 and "checkpoint.recorded" in kinds


def test_install_for_the_user_goes_to_claude_codes_config_dir(tmp_path):
    config = tmp_path / "config"
    done = subprocess.run([sys.executable, "-m", "wakeledger_agent", "hooks", "install",
                           "claude-code", "--user"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False,
                          env={**os.environ, "CLAUDE_CONFIG_DIR": str(config)})
    assert done.returncode == 0, done.stderr
    assert "hook claude-code" in (config / "settings.json").read_text()
    assert not (tmp_path / ".claude").exists()


@pytest.fixture
def once():
    """The transcript tests need no particular database: they run once."""
    from django.db import connection
    if connection.vendor != "sqlite":
        pytest.skip("the transcript tests run once, in the SQLite half of the suite")


def transcript_entry(at: datetime, text: str, *, error: str = "rate_limit",
                     uuid: str = "a07a2384-9c21-4936-b6ac-115f75eb6c86") -> str:
    """The entry Claude Code (2.1.197 and 2.1.332 alike, as recorded) writes
    for a turn an API error ended, before any hook runs."""
    return json.dumps({
        "parentUuid": "d0f7bf9e", "isSidechain": False, "type": "assistant", "uuid": uuid,
        "timestamp": at.isoformat().replace("+00:00", "Z"), "error": error,
        "isApiErrorMessage": True, "apiErrorStatus": 429, "sessionId": SESSION,
        "message": {"role": "assistant", "model": "<synthetic>",
                    "content": [{"type": "text", "text": text}]}})


def write_transcript(hooks: Hooks, *entries: str) -> None:
    user = json.dumps({"type": "user", "uuid": "u1", "isSidechain": False,
                       "timestamp": "2026-01-01T00:00:00Z",
                       "message": {"role": "user", "content": "Build it"}})
    (hooks.cwd / f"{SESSION}.jsonl").write_text("\n".join([user, *entries]) + "\n")


def test_a_limit_no_hook_reported_is_read_from_the_transcript_at_the_next_start(
        once, hooks, settings):
    """`claude -p` of Claude Code 2.1.332 kills StopFailure and SessionEnd: the
    next SessionStart of the session finds the limit in the transcript, and
    its reset (read from when the limit was met) still ahead, pauses the goal
    once."""
    settings.WAKELEDGER_RESET_MARGIN_SECONDS = 0
    hooks("SessionStart", source="startup")
    goal_id = str(Goal.objects.get().id)
    met = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    write_transcript(hooks, transcript_entry(
        met, f"API Error: Request rejected (429) · {PROVIDER_TEXT} You've hit your limit · "
             "resets in 2 hours"))  # 2 hours from when it was met
    context = hooks("SessionStart", source="resume")["hookSpecificOutput"]["additionalContext"]
    goal = Goal.objects.get()
    assert (goal.status, goal.reason) == ("paused", "RATE_LIMITED")
    assert goal.paused_until == met + timedelta(hours=2)
    assert "paused until" in context and "holds no lease" in context
    assert not lease_file(hooks, goal_id).exists()
    # Reported once: the next start (or claude-run) finds the entry accounted for.
    hooks("SessionStart", source="resume")
    assert Event.objects.filter(goal_id=goal_id, kind="run.reported").count() == 1
    assert PROVIDER_TEXT not in json.dumps(list(Event.objects.values_list("data", flat=True)))


def test_a_limit_long_lifted_or_another_failure_is_history_at_the_next_start(once, hooks):
    hooks("SessionStart", source="startup")
    # "resets 3am" met two days ago is the 3am after it: long past, not tonight's.
    write_transcript(hooks, transcript_entry(
        datetime.now(UTC) - timedelta(days=2), "You've hit your limit · resets 3am (UTC)"))
    hooks("SessionStart", source="resume")
    assert Goal.objects.get().status == "running"
    # An auth failure the human came back to fix: not a reason to fail the goal now.
    write_transcript(hooks, transcript_entry(datetime.now(UTC), "Invalid API key",
                                             error="authentication_failed", uuid="other"))
    hooks("SessionStart", source="resume")
    assert Goal.objects.get().status == "running"
    assert not Event.objects.filter(kind="run.reported").exists()


def test_stop_failure_marks_the_transcript_end_it_reported(once, hooks):
    """2.1.197's hook survives: what it reported is not reported again by the
    next start, even with the reset still ahead."""
    hooks("SessionStart", source="startup")
    text = "API Error: Request rejected (429) · You've hit your limit · resets in 2 hours"
    write_transcript(hooks, transcript_entry(datetime.now(UTC), text))
    hooks("StopFailure", error="rate_limit", last_assistant_message=text)
    assert Goal.objects.get().status == "paused"
    hooks("SessionStart", source="resume")
    assert Event.objects.filter(kind="run.reported").count() == 1


@pytest.mark.parametrize(("error", "status", "reason"), [
    ("verification_required", "failed", "OWNER_VERIFICATION"),
    ("account_on_hold", "failed", "OWNER_VERIFICATION"),
    ("cloud_credential_error", "failed", "AUTH_FAILED"),
])
def test_claude_codes_newer_error_values_ask_a_human(once, hooks, error, status, reason):
    """Claude Code 2.1.332's StopFailure values whose text says nothing our
    classifier knows: the value alone decides, and a human must act."""
    hooks("SessionStart", source="startup")
    hooks("StopFailure", error=error, last_assistant_message=f"API Error · {PROVIDER_TEXT}")
    goal = Goal.objects.get()
    assert (goal.status, goal.reason) == (status, reason)


def test_a_hosts_claim_reads_the_transcript_first(once, hooks, settings):
    """The watchdog's claim on the agent's side (`wakeledger claim`, what a
    host-fired task runs first): the unreported limit pauses the goal, and
    the claim finds no wake to take."""
    settings.WAKELEDGER_RESET_MARGIN_SECONDS = 0
    hooks("SessionStart", source="startup")
    goal_id = str(Goal.objects.get().id)
    met = datetime.now(UTC).replace(microsecond=0)
    write_transcript(hooks, transcript_entry(met, "You've hit your limit · resets in 3 hours"))
    hooks("Stop", stop_hook_active=False)  # the lease given back; no report was made
    assert Goal.objects.get().status == "waiting"
    done = subprocess.run([sys.executable, "-m", "wakeledger_agent", "claim", "--goal", goal_id,
                           "--reason", "timeout_recovery"], env=hooks.env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 8, done.stderr  # no wake for this turn
    goal = Goal.objects.get()
    assert (goal.status, goal.reason) == ("paused", "RATE_LIMITED")
    assert goal.paused_until == met + timedelta(hours=3)


# A subagent's 429 as Claude Code 2.1.332 raised it on the parent session
# while the main turn went on and completed (recorded against
# tests/fake_anthropic.py, the subagent on the small model).
SUBAGENT_LIMIT = {"agent_id": "af5d9e94bd22a3344", "agent_type": "general-purpose",
                  "error": "rate_limit", "prompt_id": "a69e15d0-6e4a-408e-b9f8-b0692cffe746",
                  "last_assistant_message": f"API Error: Request rejected (429) · "
                                            f"{PROVIDER_TEXT} · resets 3am (UTC)"}


def agent_call_entry() -> str:
    """The main thread's last entry while its subagent runs: an Agent tool call."""
    return json.dumps({"parentUuid": "u1", "isSidechain": False, "type": "assistant",
                       "uuid": "a1", "timestamp": datetime.now(UTC).isoformat(),
                       "message": {"role": "assistant", "content": [
                           {"type": "tool_use", "id": "toolu_1", "name": "Agent",
                            "input": {"prompt": "side task"}}]}})


@pytest.mark.parametrize(("fields", "note"), [
    (SUBAGENT_LIMIT, "subagent_failure"),
    # No agent_id, but the main turn is going on: a helper query's failure.
    ({k: v for k, v in SUBAGENT_LIMIT.items() if k not in ("agent_id", "agent_type")},
     "helper_failure"),
], ids=["subagent", "helper"])
def test_a_failure_that_did_not_end_the_turn_is_a_note_not_a_pause(once, hooks, fields, note):
    hooks("SessionStart", source="startup")
    goal_id = str(Goal.objects.get().id)
    write_transcript(hooks, agent_call_entry())
    hooks("StopFailure", **fields)
    goal = Goal.objects.get()
    assert (goal.status, goal.reason, goal.paused_until) == ("running", "", None), goal.state
    assert lease_file(hooks, goal_id).exists()  # the turn keeps its lease
    noted = Event.objects.get(goal_id=goal_id, kind="run.reported")
    assert (noted.data["outcome"], noted.data["note"], noted.data["class"]) == (
        "note", note, "rate_limit")
    assert not Event.objects.filter(goal_id=goal_id, kind="goal.paused").exists()
    # The main turn then completes: its Stop gives the lease back as after any turn.
    hooks("Stop")
    goal = Goal.objects.get()
    assert goal.status == "waiting" and not lease_file(hooks, goal_id).exists()
    assert PROVIDER_TEXT not in json.dumps(list(Event.objects.values_list("data", flat=True)))

def _paused_past_its_reset(hooks: Hooks, settings) -> str:
    """A session whose turn met a usage limit that resets in a second, now past."""
    settings.WAKELEDGER_RESET_MARGIN_SECONDS = 0
    hooks.env["WAKELEDGER_HOOK_TIMEOUT"] = "20"  # several calls per hook, a busy machine
    hooks("SessionStart", source="startup")
    hooks("StopFailure", error="rate_limit", error_details="429",
          last_assistant_message="API Error: Request rejected (429): try again in 1 second")
    goal = Goal.objects.get()
    assert goal.status == "paused", hooks.stderr
    time.sleep(max(0.0, (goal.paused_until - datetime.now(UTC)).total_seconds()) + 0.2)
    return str(goal.id)


def test_a_resumed_session_after_the_reset_is_its_one_continuation(hooks, settings):
    """Claude Code (or a person) resumed the session after the reset, before
    our wake: the hook says the host continued, the session holds the lease,
    and the reset's wake stands down."""
    from ledger.services import wakes

    goal_id = _paused_past_its_reset(hooks, settings)
    context = hooks("SessionStart", source="resume")["hookSpecificOutput"]["additionalContext"]
    assert "continues the goal after its usage limit's reset" in context
    assert lease_file(hooks, goal_id).exists()
    assert hooks("UserPromptSubmit", prompt="continue") == {}  # the turn goes on
    assert wakes.fire(goal_id, kind="reset").outcome == "stood_down"
    kinds = list(Event.objects.filter(goal_id=goal_id).values_list("kind", flat=True))
    assert kinds.count("continuation.host_made") == 1


def test_a_resumed_session_our_wake_beat_is_told_and_its_prompt_refused(hooks, settings):
    from ledger.services import wakes

    settings.WAKELEDGER_DISPATCHERS = {"cmd": {"type": "command", "argv": ["true"]}}
    hooks.env["WAKELEDGER_DISPATCH"] = "cmd"
    goal_id = _paused_past_its_reset(hooks, settings)
    # The reset's wake claims first (its outbox row is not sent here).
    assert wakes.fire(goal_id, kind="reset").outcome == "recurring_acquired"
    context = hooks("SessionStart", source="resume")["hookSpecificOutput"]["additionalContext"]
    assert "Do not work on goal" in context and "no second continuation" in context
    refused = hooks("UserPromptSubmit", prompt="continue")
    assert refused["decision"] == "block" and goal_id in refused["reason"]
    assert not lease_file(hooks, goal_id).exists()
    kinds = list(Event.objects.filter(goal_id=goal_id).values_list("kind", flat=True))
    assert kinds.count("continuation.stood_down") == 1


def test_the_settings_probe_reads_claude_codes_auto_continue(tmp_path):
    from wakeledger_agent.claude_settings import continues_by_itself

    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".claude").mkdir(parents=True)
    (project / ".claude").mkdir(parents=True)
    env = {"HOME": str(home)}
    assert continues_by_itself(str(project), env)  # on by default, for a claude.ai login
    assert not continues_by_itself(str(project), {**env, "ANTHROPIC_API_KEY": "sk-x"})
    (home / ".claude" / "settings.json").write_text('{"autoContinueAtUsageLimit": false}')
    assert not continues_by_itself(str(project), env)
    assert continues_by_itself(str(project), {**env, "WAKELEDGER_HOST_CONTINUES": "1"})
