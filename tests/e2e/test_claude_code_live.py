"""The real Claude Code CLI (npm's @anthropic-ai/claude-code, installed by
`make claude-code` into var/node/) run headless against a local fake of the
Messages API (tests/fake_anthropic.py): the first run meets a usage limit, the
hooks pause the goal, the reset's wake runs the documented command dispatcher
`claude --resume {session_key} -p {prompt}`, the resumed session (the same one)
finishes the goal with evidence, and nothing of the provider's text reaches
the database.

Skipped only when node is missing; with node, a missing CLI is a failure
(`make test` installs it)."""

import ast
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

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
SECRET = "PROVIDER-SECRET-TEXT"
# No telemetry, no update check, no retry of the 429 (the hook reports it at once).
QUIET = {"DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
         "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0",
         "ANTHROPIC_API_KEY": "sk-ant-fake-key"}

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def claude():
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the real Claude Code CLI cannot run here")
    if not CLAUDE.exists():
        pytest.fail(f"{CLAUDE} is missing: `make claude-code` installs it")
    return str(CLAUDE)


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


def test_real_claude_code_pauses_at_a_usage_limit_and_resumes_its_session(
        claude, agent_token, live_server, settings, monkeypatch, tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
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

    with FakeAnthropic() as fake:
        fake.message = f"{SECRET}: rate limit exceeded. Please try again in 3 seconds."
        # The documented preset, with the flags this headless run picks.
        dispatchers = {"claude-code": {
            "type": "command", "cwd": str(project), "env": ["ANTHROPIC_BASE_URL", *QUIET],
            "argv": [claude, "--resume", "{session_key}", "-p", "{prompt}",
                     "--allowedTools", "Bash", "--output-format", "json"]}}
        for name, value in {"HOME": str(home), "ANTHROPIC_BASE_URL": fake.url, **QUIET,
                            "WAKELEDGER_DISPATCHERS": json.dumps(dispatchers)}.items():
            monkeypatch.setenv(name, value)
        settings.WAKELEDGER_DISPATCHERS = dispatchers
        settings.WAKELEDGER_RUNS_DIR = tmp_path / "runs"
        settings.WAKELEDGER_RESET_MARGIN_SECONDS = 0
        settings.SITE_URL = live_server.url

        env = {"PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_BASE_URL": fake.url,
               **QUIET, "WAKELEDGER_URL": live_server.url, "WAKELEDGER_DISPATCH": "claude-code",
               "WAKELEDGER_OBJECTIVE": "Build the widget", "WAKELEDGER_DONE": "tests pass"}
        first = subprocess.run([claude, "-p", "Build the widget", "--output-format", "json"],
                               cwd=project, env=env, capture_output=True, text=True,
                               timeout=180, check=False)
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
