"""``wakeledger``: the agents' command-line client.

One command per API call, JSON on stdout, a distinct exit code per error
class, standard library only (it runs in whatever shell an agent has). It
reads WAKELEDGER_URL and WAKELEDGER_TOKEN and keeps the current goal's lease
token in a 0600 file, so consecutive calls need no copy-paste:

    wakeledger start --goal-key issue-42 --workspace /srv/shop --objective "Fix it"
    wakeledger checkpoint --step "tests written" --progress 40 --next "fix the race"
    wakeledger finish --status completed --summary "merged"
"""

import argparse
import hashlib
import json
import os
import stat
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_VALIDATION = 3
EXIT_AUTH = 4
EXIT_NOT_FOUND = 5
EXIT_LEASE_LOST = 6
EXIT_TERMINAL = 7
EXIT_CONFLICT = 8  # another conflict, or the lease was not granted
EXIT_NETWORK = 9
EXIT_SERVER = 10

_BY_CODE = {
    "lease_lost": EXIT_LEASE_LOST,
    "lease_required": EXIT_LEASE_LOST,
    "goal_terminal": EXIT_TERMINAL,
    "unauthenticated": EXIT_AUTH,
    "forbidden": EXIT_AUTH,
    "not_found": EXIT_NOT_FOUND,
}
_BY_STATUS = {400: EXIT_VALIDATION, 401: EXIT_AUTH, 403: EXIT_AUTH, 404: EXIT_NOT_FOUND,
              409: EXIT_CONFLICT, 413: EXIT_VALIDATION, 415: EXIT_VALIDATION,
              422: EXIT_VALIDATION}


class CliError(Exception):
    def __init__(self, exit_code: int, message: str, body: Any = None):
        super().__init__(message)
        self.exit_code = exit_code
        self.body = body


# ---------------------------------------------------------------- local state


def state_dir() -> Path:
    return Path(os.environ.get("WAKELEDGER_STATE_DIR") or Path.home() / ".wakeledger")


def _write_private(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Created 0600 from the start: never a moment where another user can read it.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w") as handle:
        handle.write(content)
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)


def save_lease(goal_id: str, lease: dict[str, Any]) -> None:
    record = {"goal_id": goal_id, "token": lease["token"], "generation": lease["generation"]}
    _write_private(state_dir() / "leases" / f"{goal_id}.json", json.dumps(record))
    _write_private(state_dir() / "current", goal_id)


def load_lease(goal_id: str) -> dict[str, Any]:
    path = state_dir() / "leases" / f"{goal_id}.json"
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        raise CliError(EXIT_LEASE_LOST, f"no lease saved for goal {goal_id}; run "
                       "`wakeledger lease` or `wakeledger start` first") from None
    return {"token": record["token"], "generation": record["generation"]}


def forget_lease(goal_id: str) -> None:
    (state_dir() / "leases" / f"{goal_id}.json").unlink(missing_ok=True)


def current_goal(given: str | None) -> str:
    if given:
        return given
    try:
        return (state_dir() / "current").read_text().strip()
    except OSError:
        raise CliError(EXIT_USAGE, "no current goal: pass --goal ID or run "
                       "`wakeledger start`") from None


# ---------------------------------------------------------------- HTTP


def call(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    base = os.environ.get("WAKELEDGER_URL", "").rstrip("/")
    token = os.environ.get("WAKELEDGER_TOKEN", "")
    if not base.startswith(("http://", "https://")):
        raise CliError(EXIT_USAGE, "set WAKELEDGER_URL to the API's http(s) URL "
                       "(e.g. http://127.0.0.1:8000/api/v1)")
    if not token:
        raise CliError(EXIT_AUTH, "set WAKELEDGER_TOKEN to your API token")
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    data = None
    if method == "POST":
        data = json.dumps(body or {}).encode()
        headers["Content-Type"] = "application/json"
        # One key per logical call: the retry below is then safe, because the
        # server replays the first answer instead of acting twice.
        headers["Idempotency-Key"] = str(uuid.uuid4())
    timeout = float(os.environ.get("WAKELEDGER_TIMEOUT", "30"))
    last_error: Exception | None = None
    for _attempt in range(2):
        # The scheme was checked above: only http(s), never file: or ftp:.
        request = urllib.request.Request(f"{base}/{path}", data=data,  # noqa: S310
                                         headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            raise _http_error(error) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            last_error = error
    raise CliError(EXIT_NETWORK, f"cannot reach {base}: {last_error}")


def _http_error(error: urllib.error.HTTPError) -> CliError:
    try:
        body = json.loads(error.read() or b"null")
    except ValueError:
        body = None
    code = body.get("code") if isinstance(body, dict) else None
    exit_code = _BY_CODE.get(code) or _BY_STATUS.get(error.code)
    if exit_code is None:
        exit_code = EXIT_SERVER if error.code >= 500 else EXIT_VALIDATION
    detail = body.get("detail") if isinstance(body, dict) else error.reason
    return CliError(exit_code, f"{error.code} {code or ''}: {detail}".strip(), body)


# ---------------------------------------------------------------- commands


def cmd_start(args: argparse.Namespace) -> Any:
    body: dict[str, Any] = {
        "goal_key": args.goal_key, "workspace": args.workspace, "objective": args.objective,
        "done_criteria": args.done, "next_actions": args.next,
    }
    session = {k: v for k, v in (("agent_id", args.agent_id), ("session_key", args.session_key),
                                 ("session_id", args.session_id), ("model", args.model),
                                 ("timezone", args.timezone)) if v}
    if session:
        body["session"] = session
    policy = {k: v for k, v in (("lease_seconds", args.lease_seconds),
                                ("scheduler", args.scheduler)) if v}
    if policy:
        body["policy"] = policy
    if args.timeout:
        body["timeout_seconds"] = args.timeout
    if args.estimate:
        body["estimated_duration_seconds"] = args.estimate
    answer = call("POST", "goals", body)
    goal_id = answer["goal"]["id"]
    if answer["acquired"]:
        save_lease(goal_id, answer["lease"])
    else:
        _write_private(state_dir() / "current", goal_id)
        raise CliError(EXIT_CONFLICT, "the goal exists but its lease is held "
                       f"({answer.get('next_required_action')}, retry after "
                       f"{answer.get('retry_after_seconds')} s)", _redact(answer))
    return _redact(answer)


def cmd_lease(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    answer = call("POST", f"goals/{goal_id}/lease", {})
    if not answer["acquired"]:
        raise CliError(EXIT_CONFLICT, "the lease is held "
                       f"({answer.get('next_required_action')}, retry after "
                       f"{answer.get('retry_after_seconds')} s)", answer)
    save_lease(goal_id, answer["lease"])
    return _redact(answer)


def _fenced(goal_id: str, path: str, body: dict[str, Any]) -> Any:
    try:
        return call("POST", f"goals/{goal_id}/{path}", {"lease": load_lease(goal_id), **body})
    except CliError as error:
        if error.exit_code in (EXIT_LEASE_LOST, EXIT_TERMINAL):
            forget_lease(goal_id)  # it will never work again
        raise


def cmd_checkpoint(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    recorded = {}
    if args.overwrite:
        goal = call("GET", f"goals/{goal_id}")
        recorded = {a["path"]: a["sha256"] for a in goal["artifacts"]}
    artifacts = []
    for path in args.artifact:
        artifact = _describe(path)
        if path in recorded and recorded[path] != artifact["sha256"]:
            artifact["previous_sha256"] = recorded[path]
        artifacts.append(artifact)
    return _fenced(goal_id, "checkpoints", {
        "current_step": args.step, "progress_pct": args.progress, "completed": args.completed,
        "next_actions": args.next, "artifacts": artifacts, "errors": args.error,
        "note": args.note, "release_lease": args.release,
    })


def _describe(path: str) -> dict[str, Any]:
    try:
        content = Path(path).read_bytes()
    except OSError as error:
        raise CliError(EXIT_USAGE, f"cannot read artifact {path}: {error}") from None
    return {"path": path, "sha256": hashlib.sha256(content).hexdigest(), "bytes": len(content)}


def cmd_heartbeat(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    return _fenced(goal_id, "lease/heartbeat", {})


def cmd_release(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    answer = _fenced(goal_id, "lease/release", {})
    forget_lease(goal_id)
    return answer


def cmd_finish(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    answer = _fenced(goal_id, "finish", {"status": args.status, "summary": args.summary})
    if answer.get("completion_state") != "pending_native_cleanup":
        forget_lease(goal_id)
    return answer


def cmd_show(args: argparse.Namespace) -> Any:
    return call("GET", f"goals/{current_goal(args.goal)}")


def cmd_resume(args: argparse.Namespace) -> Any:
    return call("GET", f"goals/{current_goal(args.goal)}/resume")


def _redact(answer: dict[str, Any]) -> dict[str, Any]:
    """The lease token goes to the private file, not to stdout (and the logs
    that capture it)."""
    if answer.get("lease"):
        answer = {**answer, "lease": {**answer["lease"], "token": "(saved)"}}
    return answer


# ---------------------------------------------------------------- main


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="wakeledger", description=__doc__.splitlines()[0])
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")

    start = commands.add_parser("start", help="start or resume a goal and take its lease")
    start.add_argument("--goal-key", required=True)
    start.add_argument("--workspace", required=True)
    start.add_argument("--objective", required=True)
    start.add_argument("--done", action="append", default=[], help="a done criterion (repeat)")
    start.add_argument("--next", action="append", default=[], help="a planned step (repeat)")
    start.add_argument("--timeout", type=int, help="seconds this turn may run")
    start.add_argument("--estimate", type=int, help="estimated seconds for the whole goal")
    start.add_argument("--lease-seconds", type=int)
    start.add_argument("--scheduler", choices=["internal", "host"])
    for name in ("agent-id", "session-key", "session-id", "model", "timezone"):
        start.add_argument(f"--{name}")
    start.set_defaults(run=cmd_start)

    def goal_command(name: str, help_text: str, run: Any) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--goal", help="goal id (default: the current goal)")
        sub.set_defaults(run=run)
        return sub

    checkpoint = goal_command("checkpoint", "record a verified step", cmd_checkpoint)
    checkpoint.add_argument("--step", required=True)
    checkpoint.add_argument("--progress", type=int, required=True)
    checkpoint.add_argument("--completed", action="append", default=[])
    checkpoint.add_argument("--next", action="append", default=[])
    checkpoint.add_argument("--artifact", action="append", default=[],
                            help="a file to record with its sha256 and size (repeat)")
    checkpoint.add_argument("--overwrite", action="store_true",
                            help="allow re-recording an artifact path with a new checksum")
    checkpoint.add_argument("--error", action="append", default=[])
    checkpoint.add_argument("--note", default="")
    checkpoint.add_argument("--release", action="store_true",
                            help="release the lease (the last checkpoint before a turn ends)")
    goal_command("heartbeat", "renew the lease", cmd_heartbeat)
    goal_command("release", "release the lease", cmd_release)
    goal_command("lease", "acquire the lease (or take over a stale one)", cmd_lease)
    finish = goal_command("finish", "finish the goal", cmd_finish)
    finish.add_argument("--status", required=True, choices=["completed", "failed", "blocked"])
    finish.add_argument("--summary", default="")
    goal_command("show", "the goal's state", cmd_show)
    goal_command("resume", "the resume packet", cmd_resume)

    def serve_mcp(_args: argparse.Namespace) -> Any:
        from api import mcp_server  # lazily: only this command needs the `mcp` package
        sys.exit(mcp_server.main())

    commands.add_parser("mcp", help="serve these calls as MCP tools over stdio "
                        "(docs/agents.md)").set_defaults(run=serve_mcp)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        result = args.run(args)
    except CliError as error:
        if error.body is not None:
            print(json.dumps(error.body, indent=2))
        print(f"wakeledger: {error}", file=sys.stderr)
        return error.exit_code
    print(json.dumps(result, indent=2))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
