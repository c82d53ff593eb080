"""``wakeledger openclaw install|uninstall|resume|notes``: the OpenClaw side.

- ``install`` links the plugin shipped in this package (``openclaw_plugin/``)
  into the OpenClaw config of the current HOME (``~/.openclaw/openclaw.json``,
  or the file ``OPENCLAW_CONFIG_PATH`` names): its folder in
  ``plugins.load.paths`` and ``plugins.entries.wakeledger`` (enabled, the
  conversation access its hooks need, the server URL and the hook command).
  Idempotent; every other key is kept. The API token is not written there:
  the hook reads ``~/.wakeledger/token`` (0600), as Claude Code's hooks do.
  OpenClaw reads JSON5; we read and write plain JSON (valid JSON5) and refuse
  a file with JSON5-only syntax rather than lose its comments.
- ``resume`` is what a granted wake's command dispatcher runs: it keeps the
  lease the dispatcher handed over (in its environment) in the lease files,
  where the plugin's hooks and ``wakeledger mcp --share-leases`` in the
  Gateway find it — the turn runs in the Gateway, not in this process — then
  runs ``openclaw agent --session-key K --message M`` (M saying the lease is
  with the Gateway's tools now) and exits with its code.
- ``notes`` puts one note per terminal stop into the stopped goal's OpenClaw
  session chat, for the token's agent whatever its name (the Gateway's
  ``chat.inject``: a transcript entry, no model turn), remembering what it
  noted; run it from a command automation.
"""

import difflib
import json
import os
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ledger.domain.vocabulary import LEASE_WITH_HOST_TOOLS, lease_hint_moved
from wakeledger_agent import client
from wakeledger_agent.errors import EXIT_USAGE, CliError
from wakeledger_agent.leases import FileLeases, state_dir, write_private

PLUGIN_ID = "wakeledger"
PLUGIN_DIR = Path(__file__).resolve().parent / "openclaw_plugin"


def config_path() -> Path:
    given = os.environ.get("OPENCLAW_CONFIG_PATH")
    return Path(given) if given else Path.home() / ".openclaw" / "openclaw.json"


def default_command() -> list[str]:
    """This very program, by absolute path: the Gateway runs it without our venv."""
    return [sys.executable, "-m", "wakeledger_agent"]


def _load(path: Path) -> tuple[str, dict[str, Any]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return "", {}
    try:
        config = json.loads(text) if text.strip() else {}
    except ValueError:
        raise CliError(EXIT_USAGE, f"{path} uses JSON5 syntax (comments, unquoted keys) that "
                       "this command would not keep; add the plugin with `openclaw config set` "
                       "instead (docs/agents.md §2)") from None
    if not isinstance(config, dict):
        raise CliError(EXIT_USAGE, f"{path} is not a JSON object; fix it first")
    return text, config


def with_plugin(config: dict[str, Any], url: str, command: list[str],
                dispatch: str | None) -> dict[str, Any]:
    out = without_plugin(config)
    plugins = dict(out.get("plugins") or {})
    load = dict(plugins.get("load") or {})
    load["paths"] = [*(load.get("paths") or []), str(PLUGIN_DIR)]
    entries = dict(plugins.get("entries") or {})
    settings: dict[str, Any] = {"url": client.api_base(url), "command": command}
    entries[PLUGIN_ID] = {"enabled": True, "hooks": {"allowConversationAccess": True},
                          "config": settings}
    if dispatch:
        settings["dispatch"] = dispatch
    out["plugins"] = {**plugins, "load": load, "entries": entries}
    if isinstance(plugins.get("allow"), list):  # an allowlist in use: ours on it too
        out["plugins"]["allow"] = [*plugins["allow"], PLUGIN_ID]
    return out


def without_plugin(config: dict[str, Any]) -> dict[str, Any]:
    out = dict(config)
    plugins = dict(out.get("plugins") or {})
    if not plugins:
        return out
    load = dict(plugins.get("load") or {})
    if "paths" in load:
        load["paths"] = [p for p in load["paths"] if Path(str(p)).name != PLUGIN_DIR.name]
        if not load["paths"]:
            del load["paths"]
    entries = {k: v for k, v in (plugins.get("entries") or {}).items() if k != PLUGIN_ID}
    plugins = {**plugins, "load": load, "entries": entries}
    if isinstance(plugins.get("allow"), list):
        plugins["allow"] = [p for p in plugins["allow"] if p != PLUGIN_ID]
    out["plugins"] = {k: v for k, v in plugins.items() if v != {} or k not in ("load", "entries")}
    if not out["plugins"]:
        del out["plugins"]
    return out


def change(path: Path, new: Any) -> str:
    before, config = _load(path)
    after_config = new(config)
    if after_config == config:
        return ""
    after = json.dumps(after_config, indent=2) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".wakeledger-tmp")
    temporary.write_text(after)
    temporary.chmod(path.stat().st_mode & 0o777 if before else 0o600)
    temporary.replace(path)  # atomic: the Gateway's watcher never reads half a file
    return "".join(difflib.unified_diff(before.splitlines(keepends=True),
                                        after.splitlines(keepends=True),
                                        f"a/{path}", f"b/{path}"))


def install(url: str, command: list[str] | None = None, dispatch: str | None = None) -> str:
    if not url.startswith(("http://", "https://")):
        raise CliError(EXIT_USAGE, "--url must be the server's http(s) URL")
    return change(config_path(),
                  lambda c: with_plugin(c, url, command or default_command(), dispatch))


def uninstall() -> str:
    return change(config_path(), without_plugin)


# ---------------------------------------------------------------- the continuation


def resume(session_key: str, message: str, openclaw: str) -> int:
    """Keep the dispatched lease where the Gateway's hooks find it, then run
    the continuation turn in the same session."""
    goal_id = os.environ.get("WAKELEDGER_GOAL_ID", "")
    token = os.environ.get("WAKELEDGER_LEASE_TOKEN", "")
    generation = os.environ.get("WAKELEDGER_LEASE_GENERATION", "")
    if goal_id and token and generation.isdigit():
        leases = FileLeases()
        leases.save(goal_id, {"token": token, "generation": int(generation)})
        leases.bind_session(session_key, goal_id)
        # The turn runs in the Gateway, whose tools now hold the lease: the
        # prompt says so, not "in the environment" (which the model never sees).
        message = lease_hint_moved(message, LEASE_WITH_HOST_TOOLS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAKELEDGER_LEASE")}
    return subprocess.call([openclaw, "agent", "--session-key", session_key,  # noqa: S603
                            "--message", message, "--json"], env=env)


# ---------------------------------------------------------------- terminal stops


def every_alert(api: client.Client, page_size: int = 200) -> Iterator[dict[str, Any]]:
    """Every goal that needs a human, page after page (``next`` until null)."""
    cursor = None
    while True:
        page = api.call("GET", "alerts", query={"page_size": page_size, "cursor": cursor})
        yield from page.get("results", [])
        following = urllib.parse.parse_qs(
            urllib.parse.urlsplit(page.get("next") or "").query).get("cursor")
        if not following:
            return
        cursor = following[0]


def notes(openclaw: str) -> list[dict[str, str]]:
    """One chat note per terminal stop (goal and the time it stopped), for
    the goals this agent's OpenClaw sessions hold, whatever the agent's name."""
    api = client.from_env()
    seen_path = state_dir() / "openclaw-notes.json"
    try:
        seen = set(json.loads(seen_path.read_text()))
    except (OSError, ValueError):
        seen = set()
    noted = []
    for alert in every_alert(api):
        mark = f"{alert['id']}@{alert.get('since')}"
        # The token's own goals only (the server shows an agent nothing
        # else), whatever the agent is called; of those, the ones an OpenClaw
        # session holds, whose key the Gateway names agent:<agent id>:<key>.
        if mark in seen:
            continue
        goal = api.call("GET", f"goals/{alert['id']}")
        key = str((goal.get("session") or {}).get("session_key") or "")
        if not key.startswith("agent:"):
            continue
        text = (f"Wake Ledger: goal {alert['id']} needs you — {alert.get('reason')}: "
                f"{alert.get('why')}")
        params = {"sessionKey": key, "message": text}
        done = subprocess.run([openclaw, "gateway", "call", "chat.inject",  # noqa: S603
                               "--params", json.dumps(params), "--json"],
                              capture_output=True, text=True, timeout=60, check=False)
        if done.returncode == 0:
            seen.add(mark)
            noted.append({"goal": alert["id"], "session_key": key})
        else:
            print(f"wakeledger: chat.inject failed for goal {alert['id']}: "
                  f"{done.stderr.strip()[-300:]}", file=sys.stderr)
    write_private(seen_path, json.dumps(sorted(seen)))
    return noted
