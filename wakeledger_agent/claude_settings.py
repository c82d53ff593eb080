"""``wakeledger hooks install|uninstall claude-code``: our hooks in Claude
Code's ``settings.json``, merged in and taken out again.

Idempotent (installing twice changes nothing), keeping every other hook and
setting; ours are the command hooks whose command ends with ``hook
claude-code``. Each run prints the unified diff of what it changed.
"""

import difflib
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from wakeledger_agent.errors import EXIT_USAGE, CliError

EVENTS = ("SessionStart", "UserPromptSubmit", "StopFailure", "Stop", "SessionEnd")
MARK = "hook claude-code"
# Claude Code's own default is 60 s; ours answer within a few (HOOK_TIMEOUT per call).
TIMEOUT_SECONDS = 30


def default_command() -> str:
    """This very program, by absolute path: hooks run without the venv's PATH."""
    return shlex.join([sys.executable, "-m", "wakeledger_agent", "hook", "claude-code"])


def settings_path(project: str | None, user: bool) -> Path:
    if user:
        root = os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude"
        return Path(root) / "settings.json"
    return Path(project or ".") / ".claude" / "settings.json"


def _ours(hook: Any) -> bool:
    return isinstance(hook, dict) and str(hook.get("command", "")).rstrip().endswith(MARK)


def without_ours(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings with our hooks taken out, and the groups and events they
    leave empty; everything else as it was."""
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return settings
    kept: dict[str, Any] = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            kept[event] = groups
            continue
        left = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                inner = [h for h in group["hooks"] if not _ours(h)]
                if not inner and group["hooks"]:
                    continue  # a group that held only ours
                group = {**group, "hooks": inner}
            left.append(group)
        if left or not groups:
            kept[event] = left
    out = {**settings, "hooks": kept}
    if not kept:
        del out["hooks"]
    return out


def with_ours(settings: dict[str, Any], command: str) -> dict[str, Any]:
    out = without_ours(settings)
    hooks = dict(out.get("hooks") or {})
    for event in EVENTS:
        ours = {"hooks": [{"type": "command", "command": command,
                           "timeout": TIMEOUT_SECONDS}]}
        hooks[event] = [*(hooks.get(event) or []), ours]
    return {**out, "hooks": hooks}


def _load(path: Path) -> tuple[str, dict[str, Any]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return "", {}
    except OSError as error:
        raise CliError(EXIT_USAGE, f"cannot read {path}: {error}") from None
    try:
        settings = json.loads(text) if text.strip() else {}
    except ValueError as error:
        raise CliError(EXIT_USAGE, f"{path} is not JSON ({error}); fix it first") from None
    if not isinstance(settings, dict):
        raise CliError(EXIT_USAGE, f"{path} is not a JSON object; fix it first")
    return text, settings


def change(path: Path, new: Any) -> str:
    """Write the settings ``new`` makes of the file (a function of the old
    ones) and answer the diff; no write when nothing changes."""
    before, settings = _load(path)
    after_settings = new(settings)
    if after_settings == settings:
        return ""
    after = json.dumps(after_settings, indent=2) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".wakeledger-tmp")
    temporary.write_text(after)
    if before:
        temporary.chmod(path.stat().st_mode & 0o777)  # keep the file's own permissions
    temporary.replace(path)  # atomic: Claude Code never reads half a file
    return "".join(difflib.unified_diff(before.splitlines(keepends=True),
                                        after.splitlines(keepends=True),
                                        f"a/{path}", f"b/{path}"))


def install(path: Path, command: str) -> str:
    return change(path, lambda settings: with_ours(settings, command))


def uninstall(path: Path) -> str:
    return change(path, without_ours)


# ---------------------------------------------------------------- the host's own continue

# Claude Code 2.1.234+ continues a session by itself when a claude.ai usage
# limit resets: the setting "Continue automatically at usage limit" (in
# 2.1.332's code: ``autoContinueAtUsageLimit``, default true; a user's
# settings.json may only turn it off). It arms only for a claude.ai login,
# never with an API key or a cloud provider (their limits are not usage
# windows). ``WAKELEDGER_HOST_CONTINUES`` (1/0) overrides the reading.
API_CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK",
                   "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY")


def continues_by_itself(project: str, env: dict[str, str] | None = None) -> bool:
    """Whether this Claude Code continues its sessions at a usage-limit reset
    by itself, as far as its settings and login tell."""
    env = dict(os.environ) if env is None else env
    forced = env.get("WAKELEDGER_HOST_CONTINUES", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    if any(env.get(name) for name in API_CREDENTIALS):
        return False
    root = Path(env.get("CLAUDE_CONFIG_DIR") or Path(env.get("HOME") or Path.home()) / ".claude")
    for path in (root / "settings.json", Path(project) / ".claude" / "settings.json",
                 Path(project) / ".claude" / "settings.local.json"):
        try:
            value = json.loads(path.read_text()).get("autoContinueAtUsageLimit")
        except (OSError, ValueError, AttributeError):
            continue
        if value is False:
            return False
    return True
