"""One continuation per reset with the real Claude Code 2.1.332 (var/claude-current,
Node 24 first on PATH) against the fake provider (tests/fake_anthropic.py),
on SQLite and on PostgreSQL.

Each round: a session meets a usage limit and its goal pauses until the
reset (1 s). Just after the reset, the host continues the session by itself
(a real ``claude --resume -p``, as Claude Code's own auto-continue or a
person would: no lease from us in its environment), and our reset wake fires
a moment later through the documented command dispatcher (``wakeledger
claude-run -- claude --resume {session_key} -p {prompt}``). The delay between
the two varies from round to round, so either may reach the ledger first.
Whichever wins, exactly one continuation runs a turn of the session: the
ledger records one (host-made, or the wake's), charged once, and the loser
stands down, recorded (a wake's claim ``stood_down`` and no dispatch; or the
host's ``continuation.stood_down`` and its prompt refused by the hook).
"""

import ast
import json
import os
import subprocess
import time

import pytest
from django.db import connection
from django_q.models import Schedule

from ledger.models import Event, Goal
from scheduling import tasks, watchdogs
from scheduling.models import Dispatch
from tests.e2e.test_claude_code_live import (
    CLAUDE_CURRENT,
    NODE24,
    QUIET,
    WRAPPER,
    install_hooks,
    passthrough,
)
from tests.fake_anthropic import FakeAnthropic
from tests.helpers import issue_agent_token, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ROUNDS = int(os.environ.get("WAKELEDGER_CONTINUATION_ROUNDS", "10"))
# Seconds between the host's start and our wake's fire: Claude Code's
# SessionStart hook reaches the ledger about 1-2 s after its start, so the
# early rounds let the wake win and the later ones the host.
DELAYS = [0.0, 0.3, 0.6, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0]


def turn_starts(requests: list[dict]) -> int:
    """Requests that start a model turn: the last message is the prompt (with
    the hooks' context), not a tool's result."""
    count = 0
    for request in requests:
        messages = request["body"].get("messages") or []
        last = messages[-1] if messages else {}
        content = last.get("content")
        blocks = content if isinstance(content, list) else []
        if not any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            count += 1
    return count


def test_the_hosts_own_continuation_and_our_wake_make_one_continuation_per_reset(
        live_server, settings, monkeypatch, tmp_path):
    if not (NODE24 / "node").exists() or not CLAUDE_CURRENT.exists():
        pytest.skip("Claude Code 2.1.332 with Node 24 is not installed (make node24 "
                    "claude-code-current)")
    path = f"{NODE24}{os.pathsep}{os.environ['PATH']}"
    claude = str(CLAUDE_CURRENT)
    token = issue_agent_token("claude-code-live")
    home = tmp_path / "home"
    winners: dict[str, int] = {"host": 0, "wake": 0}
    with FakeAnthropic() as fake:
        fake.message = "rate limit exceeded. Please try again in 1 second."
        dispatchers = {"claude-code": {
            "type": "command", "cwd": str(tmp_path),
            "env": ["ANTHROPIC_BASE_URL", *QUIET, *passthrough()],
            "argv": [*WRAPPER, claude, "--resume", "{session_key}", "-p", "{prompt}",
                     "--allowedTools", "Bash", "--output-format", "json"]}}
        for name, value in {"HOME": str(home), "PATH": path, "ANTHROPIC_BASE_URL": fake.url,
                            **QUIET, "WAKELEDGER_DISPATCHERS": json.dumps(dispatchers)}.items():
            monkeypatch.setenv(name, value)
        settings.WAKELEDGER_DISPATCHERS = dispatchers
        settings.WAKELEDGER_RESET_MARGIN_SECONDS = 0
        settings.SITE_URL = live_server.url
        env = {"PATH": path, "HOME": str(home), "ANTHROPIC_BASE_URL": fake.url, **QUIET,
               **passthrough(), "WAKELEDGER_URL": live_server.url,
               "WAKELEDGER_DISPATCH": "claude-code", "WAKELEDGER_OBJECTIVE": "Build the widget",
               "WAKELEDGER_DONE": "tests pass",
               # Ten rounds of two CLIs on a busy machine: a hook call given
               # more than its 3 s default, so load never reads as no server.
               "WAKELEDGER_HOOK_TIMEOUT": "10"}
        for n, delay in enumerate(DELAYS[:ROUNDS]):
            project = tmp_path / f"project-{n}"
            if n == 0:
                install_hooks(home, project, token)
            else:
                project.mkdir()
                subprocess.run([*WRAPPER[:3], "hooks", "install", "claude-code", "--project",
                                str(project)], capture_output=True, check=True, timeout=60)
            settings.WAKELEDGER_RUNS_DIR = tmp_path / f"runs-{n}"
            fake.limited, fake.bash_command = True, "true"
            first = subprocess.run([*WRAPPER, claude, "-p", "Build the widget",
                                    "--output-format", "json"], cwd=project, env=env,
                                   capture_output=True, text=True, timeout=180, check=False)
            session_id = json.loads(first.stdout)["session_id"]
            goal = wait_for(lambda s=session_id: Goal.objects.filter(
                session_key=s, status="paused").first(), 15,
                f"the pause (claude-run said: {first.stderr[-600:]})")
            gid = str(goal.id)
            row = Schedule.objects.get(name=watchdogs.reset_schedule_name(gid))
            intended, kwargs = row.next_run, ast.literal_eval(row.kwargs)
            wait_for(lambda r=row: r.next_run.timestamp() <= time.time(), 30, "the reset")
            fake.limited = False
            seen = len(fake.requests)
            # The host's own continuation just after the reset, before our wake.
            host = subprocess.Popen([claude, "--resume", session_id, "-p", "continue",
                                     "--allowedTools", "Bash", "--output-format", "json"],
                                    cwd=project, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            time.sleep(delay)  # the race's offset (see DELAYS), not an assertion
            outcome = tasks.fire_watchdog(gid, intended_date=intended.isoformat(), **kwargs)
            host.communicate(timeout=180)
            if outcome == "recurring_acquired":
                log = wait_for(lambda n=n: next((tmp_path / f"runs-{n}").glob("*.log"), None),
                               30, "the dispatched run's log")
                wait_for(lambda log=log: log.read_text().strip(), 120, "the dispatched run")
            winners["wake" if outcome == "recurring_acquired" else "host"] += 1
            # One turn of the session ran after the reset, whoever won.
            assert turn_starts(fake.requests[seen:]) == 1, (n, delay, outcome)
            kinds = list(Event.objects.filter(goal_id=gid).order_by("seq")
                         .values_list("kind", flat=True))
            made = kinds.count("continuation.host_made")
            granted = Event.objects.filter(goal_id=gid, kind="wake.claimed",
                                           data__outcome="recurring_acquired").count()
            assert made + granted == 1, (n, delay, outcome, kinds)
            assert kinds.count("continuation.charged") == 1, kinds
            if granted:  # the host lost: told (its prompt refused) and recorded
                assert kinds.count("continuation.stood_down") == 1, kinds
                assert Dispatch.objects.filter(goal_id=gid).count() == 1
            else:  # the wake lost: its claim stood down, nothing dispatched
                assert outcome == "stood_down", outcome
                assert Dispatch.objects.filter(goal_id=gid).count() == 0
    print(f"\none continuation per reset in {ROUNDS} of {ROUNDS} rounds on "
          f"{connection.vendor}: the host won {winners['host']}, the wake {winners['wake']}")
    assert sum(winners.values()) == ROUNDS
