"""`wakeledger supervise` over real HTTP: a live server, the supervisor as a
subprocess, and scripts standing in for agent CLIs — each provider's limit
notice, a clean turn, a crash (SIGKILL), a Ctrl-C — and, on PostgreSQL,
`--until-done` through a real qcluster wake."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ledger.models import Event, Goal
from tests.helpers import issue_agent_token, wait_for

ROOT = Path(__file__).resolve().parents[2]
SUPERVISE = [sys.executable, "-m", "wakeledger_agent", "supervise"]

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]  # live server, processes


@pytest.fixture
def agent_token(transactional_db):
    return issue_agent_token("supervised-agent")


@pytest.fixture
def shell(live_server, agent_token, tmp_path):
    return {**os.environ, "WAKELEDGER_URL": f"{live_server.url}/api/v1",
            "WAKELEDGER_TOKEN": agent_token, "WAKELEDGER_STATE_DIR": str(tmp_path / "state"),
            "WAKELEDGER_TIMEOUT": "10"}


def script(tmp_path: Path, name: str, body: str) -> list[str]:
    """An "agent CLI": a Python script; the command that runs it."""
    path = tmp_path / f"{name}.py"
    path.write_text("import json, os, signal, sys, time\n" + textwrap.dedent(body))
    return [sys.executable, str(path)]


def supervise(env: dict, key: str, command: list[str], *extra: str,
              timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*SUPERVISE, "--workspace", f"/srv/{key}", "--goal-key", key,
                           "--objective", f"supervised {key}", "--timezone", "UTC", *extra,
                           "--", *command], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, check=False)


def start(env: dict, key: str, command: list[str], *extra: str) -> subprocess.Popen:
    return subprocess.Popen([*SUPERVISE, "--workspace", f"/srv/{key}", "--goal-key", key,
                             "--objective", f"supervised {key}", "--timezone", "UTC", *extra,
                             "--", *command], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def goal_of(key: str) -> Goal:
    return Goal.objects.get(goal_key=key)


def history(goal: Goal) -> list[Event]:
    return list(Event.objects.filter(goal_id=goal.pk).order_by("seq"))


def next_wall_time(now: datetime, hour: int, minute: int) -> datetime:
    """The next hh:mm UTC at or after now, worked out by hand."""
    today = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    return today if today >= now else today + timedelta(days=1)


# Each provider's notice as tests/domain/test_failures.py quotes it (the Codex and Claude Code
# wall times as their users reported them), and how its reset is read: an absolute wall
# time, a delay from now, or none (the server's per-minute backoff, 1 min).
LIMITS = {
    "codex": ("■ You've hit your usage limit. Upgrade to Pro "
              "(https://openai.com/chatgpt/pricing) or try again at 6:44 PM.",
              ("at", 18, 44)),
    "claude-code": ("5-hour limit reached ∙ resets 3am", ("at", 3, 0)),
    "anthropic-api": ('[{"error":"Error: 429 {\\"type\\":\\"error\\",\\"error\\":{\\"type\\":'
                      '\\"rate_limit_error\\",\\"message\\":\\"This request would exceed '
                      'your account\'s rate limit. Please try again later.\\"}}",'
                      '"timestamp":"2025-11-11T16:40:06.075Z"}]', None),
    "openai": ("openai.error.RateLimitError: Rate limit reached for gpt-4 in organization "
               "org-uVqpjtJiKqvVJMVfvpaounIh on tokens per min (TPM): Limit 10000, Used "
               "8554, Requested 3082. Please try again in 9.816s.", ("in", 9.816)),
    "gemini": ('{"error":{"code":429,"status":"RESOURCE_EXHAUSTED",\n  "details":[{"@type":'
               '"…/google.rpc.RetryInfo","retryDelay":"38s"}]}}', ("in", 38)),
}


@pytest.mark.parametrize("provider", list(LIMITS))
def test_a_limit_notice_pauses_the_goal_until_its_reset(shell, tmp_path, provider, settings):
    text, reset = LIMITS[provider]
    agent = script(tmp_path, "limited", f"""
        print("reading the repository…")
        print({text!r}, file=sys.stderr)
        sys.exit(1)
    """)
    before = datetime.now(UTC)
    done = supervise(shell, f"limit-{provider}", agent)
    after = datetime.now(UTC)
    assert done.returncode == 1, done.stderr
    assert text in done.stderr and "reading the repository" in done.stdout  # passed through
    assert "\r" not in done.stderr  # no progress line in a pipe

    goal = goal_of(f"limit-{provider}")
    assert (goal.status, goal.reason) == ("paused", "RATE_LIMITED"), done.stderr
    reported = next(e for e in history(goal) if e.kind == "run.reported")
    assert reported.data["class"] == "rate_limit"
    stated = datetime.fromisoformat(reported.data["reset_at"]) if reported.data["reset_at"] \
        else None
    if reset is None:
        assert stated is None and "request-rate backoff 1 min" in next(
            e for e in history(goal) if e.kind == "goal.paused").data["basis"]
    elif reset[0] == "at":
        assert stated == next_wall_time(before, reset[1], reset[2])
    else:
        # A delay counts from when it was read; sent to the second, rounded up.
        assert before + timedelta(seconds=reset[1]) <= stated \
            <= after + timedelta(seconds=reset[1] + 1)
    # The output stayed on this machine: not one fragment of it in any event.
    recorded = json.dumps([e.data for e in history(goal)])
    for fragment in ("usage limit", "limit reached", "org-uVqp", "RESOURCE_EXHAUSTED",
                     "rate_limit_error", "reading the repository"):
        assert fragment not in recorded
    state = Path(shell["WAKELEDGER_STATE_DIR"])
    assert not list((state / "leases").glob("*.json"))  # the paused goal's lease is gone


def test_a_clean_turn_heartbeats_with_the_lease_in_the_environment_and_releases(shell,
                                                                                 tmp_path):
    seen = tmp_path / "seen.json"
    agent = script(tmp_path, "agent", f"""
        token = os.environ["WAKELEDGER_LEASE_TOKEN"]
        json.dump({{"goal": os.environ["WAKELEDGER_GOAL_ID"],
                   "generation": os.environ["WAKELEDGER_LEASE_GENERATION"],
                   "url": os.environ["WAKELEDGER_URL"],
                   "sha256": __import__("hashlib").sha256(token.encode()).hexdigest(),
                   "on_command_line": token in open("/proc/%d/cmdline" % os.getppid()).read()
                                      or token in " ".join(sys.argv)}},
                  open({str(seen)!r}, "w"))
        time.sleep(4.5)  # longer than the 5 s lease less a beat: heartbeats keep it
        print("all green")
    """)
    done = supervise(shell, "clean-turn", agent, "--lease-seconds", "5")
    assert done.returncode == 0, done.stderr
    assert "all green" in done.stdout and "lease released" in done.stderr

    goal = goal_of("clean-turn")
    env = json.loads(seen.read_text())
    acquired = next(e for e in history(goal) if e.kind == "lease.acquired")
    assert env["goal"] == str(goal.pk) and env["generation"] == "1"
    assert env["url"] == shell["WAKELEDGER_URL"]
    assert env["sha256"] == acquired.data["token_sha256"] and not env["on_command_line"]
    kinds = [e.kind for e in history(goal)]
    assert kinds.count("lease.renewed") >= 2
    # The run reported ok, then the release that ends the turn (which arms the watchdog).
    assert kinds[kinds.index("run.reported"):] == ["run.reported", "lease.released",
                                                  "wake.scheduled", "receipt.recorded"]
    assert next(e for e in history(goal) if e.kind == "run.reported").data["outcome"] == "ok"
    assert goal.status == "waiting"


def test_a_sigkilled_child_is_reported_as_a_crash(shell, tmp_path):
    pid_file = tmp_path / "pid"
    agent = script(tmp_path, "doomed", f"""
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        print("half way through a migration")
        time.sleep(60)
    """)
    running = start(shell, "crash", agent)
    pid = int(wait_for(lambda: pid_file.exists() and pid_file.read_text(), 20, "the child"))
    os.kill(pid, signal.SIGKILL)
    _out, err = running.communicate(timeout=30)
    assert running.returncode == 128 + signal.SIGKILL, err

    goal = goal_of("crash")
    reported = next(e for e in history(goal) if e.kind == "run.reported")
    assert reported.data["class"] == "unclassified"
    assert (goal.status, goal.reason) == ("blocked", "UNCLASSIFIED")
    assert "killed by signal 9" in err
    assert "migration" not in json.dumps([e.data for e in history(goal)])


def test_ctrl_c_is_forwarded_once_releases_the_lease_and_leaves_the_goal_resumable(shell,
                                                                                    tmp_path):
    marks = tmp_path / "sigints"
    agent = script(tmp_path, "patient", f"""
        def stop(signum, frame):
            open({str(marks)!r}, "a").write("INT\\n")
            sys.exit(130)
        signal.signal(signal.SIGINT, stop)
        print("working", flush=True)
        time.sleep(60)
    """)
    running = start(shell, "ctrl-c", agent)
    wait_for(lambda: Event.objects.filter(goal__goal_key="ctrl-c",
                                          kind="lease.acquired").exists(), 20, "the lease")
    assert running.stdout.readline() == "working\n"
    running.send_signal(signal.SIGINT)
    _out, err = running.communicate(timeout=30)
    assert running.returncode == 130, err
    assert marks.read_text() == "INT\n"  # once: a second Ctrl-C makes agent CLIs quit hard

    goal = goal_of("ctrl-c")
    kinds = [e.kind for e in history(goal)]
    assert "lease.released" in kinds and "run.reported" not in kinds
    assert goal.status == "waiting"  # resumable: its watchdog wakes it, or supervise again
    again = supervise(shell, "ctrl-c", script(tmp_path, "quick", "print('resumed')"))
    assert again.returncode == 0 and "resumed" in again.stdout
    assert Event.objects.filter(goal_id=goal.pk, kind="lease.acquired").count() == 2



def test_a_child_silent_past_the_limit_is_stopped_and_blocks_the_goal(shell, tmp_path):
    agent = script(tmp_path, "hung", """
        print("connecting to the deploy host, token sk-live-42", flush=True)
        while True:
            time.sleep(60)
    """)
    began = time.monotonic()
    done = supervise(shell, "hung", agent, "--silent-limit", "2", timeout=30)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr  # it took the SIGTERM
    assert time.monotonic() - began < 20
    assert "no output (and no checkpoint) for 2 s" in done.stderr
    assert "stopped after 2 s without output: unclassified; goal blocked" in done.stderr

    goal = goal_of("hung")
    assert (goal.status, goal.reason) == ("blocked", "UNCLASSIFIED")
    kinds = [e.kind for e in history(goal)]
    assert "run.reported" in kinds and "lease.renewed" not in kinds[kinds.index("run.reported"):]
    assert next(e for e in history(goal) if e.kind == "run.reported").data["class"] == \
        "unclassified"
    recorded = json.dumps([e.data for e in history(goal)])
    assert "deploy host" not in recorded and "sk-live" not in recorded
    assert not list((Path(shell["WAKELEDGER_STATE_DIR"]) / "leases").glob("*.json"))


def test_ctrl_c_while_waiting_for_the_wake_ends_quietly(shell, tmp_path):
    agent = script(tmp_path, "limited", f"""
        print({LIMITS["claude-code"][0]!r}, file=sys.stderr)
        sys.exit(1)
    """)
    running = start(shell, "wait-ctrl-c", agent, "--until-done", "--poll-seconds", "1")
    wait_for(lambda: Goal.objects.filter(goal_key="wait-ctrl-c", status="paused").exists(),
             20, "the pause")
    time.sleep(1)  # the supervisor is now waiting for the 3am wake
    running.send_signal(signal.SIGINT)
    _out, err = running.communicate(timeout=10)
    assert running.returncode == 130, err
    assert "\r" not in err  # a pipe: no progress line while it waited
    goal = goal_of("wait-ctrl-c")
    assert goal.status == "paused" and goal.state["lease"] == {}  # its reset wake stands


# --------------------------------------------------------------- --until-done, real qcluster

from tests.e2e import test_e2e_qcluster as e2e  # noqa: E402  (its real-process fixtures)

receiver, fast, cluster = e2e.receiver, e2e.fast, e2e.cluster


@pytest.mark.slow
def test_until_done_resumes_through_a_real_qcluster_wake(shell, cluster, tmp_path):
    """A rate-limited run, the reset wake fired by a real `manage.py qcluster`,
    pulled by the waiting supervisor, charged once, resumed with the resume
    command (which finishes through the CLI and the shared lease store), and
    the supervisor stops at the terminal goal."""
    from django.db import connection
    from django_q.models import Schedule

    from scheduling import watchdogs

    if connection.vendor != "postgresql":
        pytest.skip("the real-process end-to-end tests run in the PostgreSQL half of the suite")
    limited = script(tmp_path, "limited", """
        print("Rate limit reached for gpt-4 in organization org-x on tokens per min (TPM): "
              "Limit 10000, Used 9990, Requested 300. Please try again in 2s.",
              file=sys.stderr)
        sys.exit(1)
    """)
    prompt = tmp_path / "prompt.txt"
    finisher = script(tmp_path, "finisher", f"""
        import subprocess
        open({str(prompt)!r}, "w").write(sys.argv[1])
        done = subprocess.run([sys.executable, "-m", "wakeledger_agent", "finish", "--status",
                               "completed", "--summary", "resumed after the limit"],
                              capture_output=True, text=True)
        print(done.stdout)
        sys.exit(done.returncode)
    """)
    began = time.monotonic()
    running = start(shell, "until-done", limited, "--until-done", "--poll-seconds", "1",
                    "--resume-cmd", " ".join([*finisher, "{prompt}"]))
    gid = str(wait_for(lambda: Goal.objects.filter(goal_key="until-done", status="paused")
                       .values_list("pk", flat=True).first(), 30, "the pause"))
    reset = wait_for(lambda: Schedule.objects.filter(
        name=watchdogs.reset_schedule_name(gid)).first(), 10, "the reset wake's row")
    time.sleep(max(0.0, (reset.next_run - datetime.now(reset.next_run.tzinfo))
                   .total_seconds()) + 0.5)
    cluster(WAKELEDGER_Q_GUARD_CYCLE="30")  # it looks at its schedules at start-up
    _out, err = running.communicate(timeout=90)
    assert running.returncode == 0, err
    assert time.monotonic() - began < 60

    goal = Goal.objects.get(pk=gid)
    assert goal.status == "done"
    claimed = Event.objects.get(goal_id=gid, kind="wake.claimed")
    assert (claimed.actor, claimed.data["outcome"], claimed.data["reason"]) == (
        "scheduler", "ready_for_pull", "rate_limit_reset")
    charge = Event.objects.get(goal_id=gid, kind="continuation.charged")
    assert (charge.data["attempt"], charge.data["max"]) == (1, 3)
    assert claimed.seq < charge.seq  # charged by the supervisor's pull, after the wake
    assert prompt.read_text().startswith(f"Resume Wake Ledger goal {gid}: supervised until-done")
    assert "resuming goal" in err and "the goal is done" in err
    assert "\r" not in err  # a pipe: no progress line
    assert not (Path(shell["WAKELEDGER_STATE_DIR"]) / "leases" / f"{gid}.json").exists()
