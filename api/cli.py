"""``wakeledger``: the agents' command-line client.

One command per API call, JSON on stdout, a distinct exit code per error
class, standard library only (it runs in whatever shell an agent has). It
reads WAKELEDGER_URL and WAKELEDGER_TOKEN and keeps the current goal's lease
token in a 0600 file, so consecutive calls need no copy-paste:

    wakeledger start --goal-key issue-42 --workspace /srv/shop --objective "Fix it"
    wakeledger checkpoint --step "tests written" --progress 40 --next "fix the race"
    wakeledger report-run --outcome error --error-text-file - < provider-error.txt
    wakeledger finish --status completed --summary "merged" \
        --evidence "tests pass=make test: 212 passed"

WAKELEDGER_URL may be the server's root (http://127.0.0.1:8000): /api/v1 is
added when the URL's path does not end with it.
"""

import argparse
import hashlib
import json
import os
import stat
import sys
import urllib.error
import urllib.parse
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
EXIT_CONFLICT = 8  # another conflict, or the lease (or a wake's claim) was not granted
EXIT_NETWORK = 9
EXIT_SERVER = 10
EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report it

API_PATH = "/api/v1"

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


def saved_lease(goal_id: str) -> dict[str, Any] | None:
    try:
        record = json.loads((state_dir() / "leases" / f"{goal_id}.json").read_text())
        return {"token": record["token"], "generation": record["generation"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load_lease(goal_id: str) -> dict[str, Any]:
    lease = saved_lease(goal_id)
    if lease is None:
        raise CliError(EXIT_LEASE_LOST, _no_saved_lease(goal_id))
    return lease


def _no_saved_lease(goal_id: str) -> str:
    """Why there is no lease to send, as the server sees the goal: a lease
    a run report or a release already gave back, a pause until its reset,
    or one held elsewhere. Asked only on this error path."""
    try:
        goal = call("GET", f"goals/{goal_id}")
    except CliError:
        goal = None
    if not isinstance(goal, dict):
        return (f"no lease saved for goal {goal_id}; run `wakeledger lease` or "
                "`wakeledger start` first")
    if goal.get("status") == "paused" and goal.get("paused_until"):
        return (f"goal {goal_id} holds no lease: the rate-limit run report already released "
                f"it, and the goal is paused until {goal['paused_until']}; run "
                "`wakeledger lease` after then (or let its reset wake resume it)")
    if goal.get("status") in ("done", "failed", "stopped"):
        return f"goal {goal_id} is {goal['status']}; it takes no more work"
    if goal.get("status") == "blocked":
        return (f"goal {goal_id} is blocked ({goal.get('reason') or 'no reason'}) until an "
                "operator acts")
    if goal.get("lease"):
        return (f"no lease saved here for goal {goal_id}; {goal['lease'].get('holder')} holds "
                f"one until {goal['lease'].get('expires_at')}")
    ended = goal.get("lease_end")
    return (f"goal {goal_id} holds no lease" + (f" (the last one was {ended})" if ended else "")
            + "; run `wakeledger lease` to take one")


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


def api_base(url: str) -> str:
    """The API's base URL from WAKELEDGER_URL: a server root (or any URL whose
    path does not end with /api/v1, such as a reverse proxy's prefix) gets
    /api/v1 added, the mistake that otherwise answers every call 404."""
    base = url.strip().rstrip("/")
    if not urllib.parse.urlsplit(base).path.endswith(API_PATH):
        base += API_PATH
    return base


def call(method: str, path: str, body: dict[str, Any] | None = None,
         query: dict[str, Any] | None = None) -> Any:
    given = os.environ.get("WAKELEDGER_URL", "")
    token = os.environ.get("WAKELEDGER_TOKEN", "").strip()
    if not given.strip().startswith(("http://", "https://")):
        raise CliError(EXIT_USAGE, "set WAKELEDGER_URL to the server's http(s) URL "
                       "(e.g. http://127.0.0.1:8000/api/v1)")
    if not token:
        raise CliError(EXIT_AUTH, "set WAKELEDGER_TOKEN to your API token")
    if token.lower().startswith("bearer "):
        token = token[len("bearer "):].strip()  # the header's prefix is ours to add
    base = api_base(given)
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    data = None
    if method in ("POST", "DELETE"):
        data = json.dumps(body or {}).encode()
        headers["Content-Type"] = "application/json"
        # One key per logical call: the retry below is then safe, because the
        # server replays the first answer instead of acting twice.
        headers["Idempotency-Key"] = str(uuid.uuid4())
    url = f"{base}/{path}"
    if query:
        url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None},
                                            doseq=True)
    timeout = float(os.environ.get("WAKELEDGER_TIMEOUT", "30"))
    last_error: Exception | None = None
    for _attempt in range(2):
        # The scheme was checked above: only http(s), never file: or ftp:.
        request = urllib.request.Request(url, data=data,  # noqa: S310
                                         headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            raise _http_error(error, base) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            last_error = error
    raise CliError(EXIT_NETWORK, f"cannot reach {base}: {last_error}")


def _http_error(error: urllib.error.HTTPError, base: str) -> CliError:
    try:
        body = json.loads(error.read() or b"null")
    except ValueError:
        body = None
    code = body.get("code") if isinstance(body, dict) else None
    if error.code == 404 and code is None:
        # Not one of our problems: the URL reaches something that is not the API.
        return CliError(EXIT_NOT_FOUND, f"404 from {error.url}: no Wake Ledger API there; "
                        f"check WAKELEDGER_URL (the API is at {base}, e.g. "
                        "http://127.0.0.1:8000/api/v1)")
    exit_code = _BY_CODE.get(code) or _BY_STATUS.get(error.code)
    if exit_code is None:
        exit_code = EXIT_SERVER if error.code >= 500 else EXIT_VALIDATION
    detail = body.get("detail") if isinstance(body, dict) else error.reason
    errors = body.get("errors") if isinstance(body, dict) else None
    if isinstance(errors, dict):
        # "see errors" is on stdout in the JSON; a human reads stderr. A
        # domain refusal repeats its detail as its field's error: name the
        # field then, not the sentence twice.
        parts = []
        for field, problems in errors.items():
            texts = [str(p) for p in (problems if isinstance(problems, list) else [problems])
                     if str(p) != detail]
            parts.append(f"{field}: {' '.join(texts)}" if texts else f"(field: {field})")
        detail = f"{detail} " + "; ".join(parts)
    return CliError(exit_code, f"{error.code} {code or ''}: {detail}".strip(), body)


# ---------------------------------------------------------------- leases


def _session(args: argparse.Namespace) -> dict[str, str]:
    return {k: v for k, v in (("agent_id", args.agent_id), ("session_key", args.session_key),
                              ("session_id", args.session_id), ("model", args.model),
                              ("timezone", args.timezone)) if v}


_HELD = ("wait_for_holder", "retry_after_stale_grace")
_WHY_REFUSED = {
    "wait_for_reset": "the goal is paused by a rate limit",
    "operator_recover": "the goal is blocked; an operator must recover it",
    "start_a_new_goal": "the goal is finished; start a new goal",
}


def _refused(goal_id: str, answer: dict[str, Any]) -> dict[str, Any]:
    """A refused acquire, unless the live lease refused is the one in our
    lease file: then we already hold it and say so (exit 0, already_held)."""
    action = answer.get("next_required_action")
    mine = saved_lease(goal_id)
    if action in _HELD and mine is not None:
        lease = call("GET", f"goals/{goal_id}").get("lease") or {}
        # Generations are unique per grant, so an equal generation is our grant.
        if lease.get("generation") == mine["generation"]:
            expiry = (f"it expired at {lease.get('expires_at')}; run `wakeledger heartbeat` "
                      "now to keep it" if action == "retry_after_stale_grace"
                      else f"expires {lease.get('expires_at')}")
            print(f"wakeledger: you already hold this goal's lease (generation "
                  f"{mine['generation']}, {expiry})", file=sys.stderr)
            return {**answer, "acquired": True, "already_held": True,
                    "retry_after_seconds": None, "next_required_action": None,
                    "lease": {**lease, "token": "(saved)"}}
    why = _WHY_REFUSED.get(action, "the lease is held by another session")
    wait = answer.get("retry_after_seconds")
    raise CliError(EXIT_TERMINAL if action == "start_a_new_goal" else EXIT_CONFLICT,
                   f"{why} ({action}" + (f", retry after {wait} s)" if wait else ")"),
                   _redact(answer))


def cmd_start(args: argparse.Namespace) -> Any:
    body: dict[str, Any] = {
        "goal_key": args.goal_key, "workspace": args.workspace, "objective": args.objective,
        "done_criteria": args.done, "next_actions": args.next,
    }
    session = _session(args)
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
        return _redact(answer)
    _write_private(state_dir() / "current", goal_id)
    return _refused(goal_id, answer)


def cmd_lease(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    answer = call("POST", f"goals/{goal_id}/lease", {})
    if not answer["acquired"]:
        return _refused(goal_id, answer)
    save_lease(goal_id, answer["lease"])
    return _redact(answer)


def _fenced(goal_id: str, path: str, body: dict[str, Any], *, method: str = "POST",
            lease_optional: bool = False) -> Any:
    lease = saved_lease(goal_id) if lease_optional else load_lease(goal_id)
    try:
        return call(method, f"goals/{goal_id}/{path}",
                    {**({"lease": lease} if lease else {}), **body})
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
    answer = _fenced(goal_id, "checkpoints", {
        "current_step": args.step, "progress_pct": args.progress, "completed": args.completed,
        "next_actions": args.next, "artifacts": artifacts, "errors": args.error,
        "note": args.note, "release_lease": args.release, **_wake(args),
    })
    if args.release:
        forget_lease(goal_id)
    return answer


def _wake(args: argparse.Namespace) -> dict[str, Any]:
    """`--wake-in SECONDS [--wake-reason R]`: a one-off wake at this turn boundary."""
    if args.wake_in is None:
        return {}
    if getattr(args, "release", True) is False:
        raise CliError(EXIT_USAGE, "--wake-in goes with --release (a wake at a turn boundary)")
    return {"wake": {"in_seconds": args.wake_in, "reason": args.wake_reason}}


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
    answer = _fenced(goal_id, "lease/release", _wake(args))
    forget_lease(goal_id)
    return answer


def cmd_finish(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    body: dict[str, Any] = {"status": args.status, "summary": args.summary}
    if args.evidence:
        criteria = call("GET", f"goals/{goal_id}").get("done_criteria", [])
        body["evidence"] = [_evidence_item(text, criteria) for text in args.evidence]
    answer = _fenced(goal_id, "finish", body)
    if answer.get("completion_state") != "pending_native_cleanup":
        forget_lease(goal_id)
    return answer


def _evidence_item(text: str, criteria: list[str]) -> dict[str, str]:
    """``CRITERION=EVIDENCE``. A criterion may hold "=" itself ("p95 <= 200 ms"),
    so the goal's own criteria are tried first, longest first; otherwise the
    text splits at its first "="."""
    for criterion in sorted(criteria, key=len, reverse=True):
        if text.startswith(criterion + "="):
            return {"criterion": criterion, "evidence": text[len(criterion) + 1:]}
    criterion, equals, evidence = text.partition("=")
    if not equals:
        raise CliError(EXIT_USAGE, f"--evidence {text!r}: expected CRITERION=EVIDENCE")
    return {"criterion": criterion, "evidence": evidence}


def cmd_workspace_release(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    return _fenced(goal_id, "workspace/release", {"reason": args.reason})


# ---------------------------------------------------------------- runs, approvals, jobs


def _error_text(args: argparse.Namespace) -> str:
    if args.error_text_file is None:
        return args.error_text or ""
    try:
        if args.error_text_file == "-":
            return sys.stdin.read()
        return Path(args.error_text_file).read_text(errors="replace")
    except OSError as error:
        raise CliError(EXIT_USAGE, f"cannot read {args.error_text_file}: {error}") from None


def cmd_report_run(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    body: dict[str, Any] = {"outcome": args.outcome, "error_text": _error_text(args),
                            "retry_after": args.retry_after or "",
                            "timezone": args.timezone or ""}
    session = _session(args)
    session.pop("timezone", None)  # the run's zone is the top-level field
    if session:
        body["session"] = session
    answer = _fenced(goal_id, "runs", body)
    if answer.get("status") != "running":
        # A reported failure ends the lease (paused, blocked or failed): the
        # next turn takes a new one, from a wake or `wakeledger lease`.
        forget_lease(goal_id)
    return answer


def cmd_request_approval(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    return _fenced(goal_id, "approvals", {"gate": args.gate, "summary": args.summary})


def cmd_job_track(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    return _fenced(goal_id, "jobs", {"kind": args.kind, "ref": args.ref, "link": args.link,
                                     "notify": args.notify})


def cmd_job_status(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    job_id = urllib.parse.quote(args.job_id, safe="")
    return _fenced(goal_id, f"jobs/{job_id}/status",
                   {"status": args.status, "conclusion": args.conclusion})


# ---------------------------------------------------------------- the watchdog


def cmd_watchdog_prepare(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    body = {"tzid": args.tzid} if args.tzid else {}
    return _fenced(goal_id, "watchdog", body)


def cmd_watchdog_cancel(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    return _fenced(goal_id, "watchdog", {}, method="DELETE")


def cmd_watchdog_receipt(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    given = (("host_ref", args.host_ref), ("due_at", args.due_at), ("runs_on", args.runs_on),
             ("verified", args.verified), ("attested_by", args.attested_by),
             ("note", args.note))
    # Only what was given: the server's defaults stand for the rest.
    body = {"status": args.status, **{k: v for k, v in given if v}}
    # A finished goal has no lease, yet its leftover host schedule's
    # cancellation receipt is still needed: the lease goes only when saved.
    answer = _fenced(goal_id, "watchdog/receipts", body, lease_optional=True)
    if answer.get("completion_state") == "completed":
        forget_lease(goal_id)  # the receipt that let a finish complete
    return answer


def cmd_claim(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    body = {k: v for k, v in (("occurrence_id", args.occurrence_id),
                              ("reason", args.reason)) if v}
    answer = call("POST", f"goals/{goal_id}/claim", body)
    if answer.get("lease"):
        save_lease(goal_id, answer["lease"])
        return _redact(answer)
    _write_private(state_dir() / "current", goal_id)
    raise CliError(EXIT_CONFLICT, f"no wake for this turn: {answer.get('outcome')}"
                   + (f" (retry after {answer['retry_after_seconds']} s)"
                      if answer.get("retry_after_seconds") else ""), answer)


# ---------------------------------------------------------------- reading


def cmd_show(args: argparse.Namespace) -> Any:
    return call("GET", f"goals/{current_goal(args.goal)}")


def cmd_resume(args: argparse.Namespace) -> Any:
    return call("GET", f"goals/{current_goal(args.goal)}/resume")


def cmd_contract(args: argparse.Namespace) -> Any:
    return call("GET", f"goals/{current_goal(args.goal)}/checkpoint")


def cmd_events(args: argparse.Namespace) -> Any:
    return call("GET", f"goals/{current_goal(args.goal)}/events",
                query={"after": args.after, "limit": args.limit})


def cmd_goals(args: argparse.Namespace) -> Any:
    return call("GET", "goals", query={"status": args.status, "reason": args.reason,
                                       "workspace": args.workspace, "agent": args.agent,
                                       "page_size": args.page_size, "cursor": args.cursor})


def cmd_alerts(args: argparse.Namespace) -> Any:
    return call("GET", "alerts")


def _redact(answer: dict[str, Any]) -> dict[str, Any]:
    """The lease token goes to the private file, not to stdout (and the logs
    that capture it)."""
    if answer.get("lease"):
        answer = {**answer, "lease": {**answer["lease"], "token": "(saved)"}}
    return answer


# ---------------------------------------------------------------- main


def _add_session(sub: argparse.ArgumentParser) -> None:
    for name in ("agent-id", "session-key", "session-id", "model", "timezone"):
        sub.add_argument(f"--{name}")


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="wakeledger", description=__doc__.splitlines()[0].replace("``", ""),
        epilog="exit codes: 0 ok, 2 usage, 3 validation, 4 auth, 5 not found, 6 lease lost, "
               "7 goal terminal, 8 conflict or lease/wake not granted, 9 network, 10 server")
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
    _add_session(start)
    start.set_defaults(run=cmd_start)

    def goal_command(name: str, help_text: str, run: Any,
                     within: Any = commands) -> argparse.ArgumentParser:
        sub = within.add_parser(name, help=help_text)
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
    release = goal_command("release", "release the lease", cmd_release)
    for ends_a_turn in (checkpoint, release):
        ends_a_turn.add_argument("--wake-in", type=int, metavar="SECONDS",
                                 help="with the release: wake me this many seconds later "
                                      "(60 to the watchdog's interval)")
        ends_a_turn.add_argument("--wake-reason", default="timeout_recovery",
                                 choices=["timeout_recovery", "dependency_ready",
                                          "scheduled_progress", "rate_limit_reset"])
    goal_command("lease", "acquire the lease (or take over a stale one); exit 0 with "
                 "already_held when the live lease is the one in your lease file", cmd_lease)
    finish = goal_command("finish", "finish the goal", cmd_finish)
    finish.add_argument("--status", required=True, choices=["completed", "failed", "blocked"])
    finish.add_argument("--summary", default="", help="what was done (required with "
                        "completed)")
    finish.add_argument("--evidence", action="append", default=[],
                        metavar="CRITERION=EVIDENCE",
                        help="with completed: what shows a done criterion holds (a link, a "
                             "command and its result); one per done criterion (repeat)")
    workspace = goal_command("workspace-release", "release the goal's workspace binding",
                             cmd_workspace_release)
    workspace.add_argument("--reason", required=True)

    report = goal_command("report-run", "report how a run ended (a rate limit pauses the "
                          "goal until its reset and schedules one wake)", cmd_report_run)
    report.add_argument("--outcome", required=True, choices=["ok", "error"])
    text = report.add_mutually_exclusive_group()
    text.add_argument("--error-text", help="the provider's message (classified, then "
                      "discarded by the server)")
    text.add_argument("--error-text-file", metavar="PATH",
                      help="read the provider's message from PATH, or stdin with -")
    report.add_argument("--retry-after", help="a Retry-After header value: seconds or an "
                        "HTTP date")
    _add_session(report)

    approval = goal_command("request-approval", "ask an operator to approve a gate; the goal "
                            "blocks until decided", cmd_request_approval)
    approval.add_argument("--gate", required=True, help="what needs approving, e.g. deploy")
    approval.add_argument("--summary", default="")

    job = commands.add_parser("job", help="blocking jobs: track, status")
    job_actions = job.add_subparsers(dest="job_action", required=True, metavar="ACTION")
    track = goal_command("track", "track a blocking job (one exact run)", cmd_job_track,
                         job_actions)
    track.add_argument("--kind", required=True, help="e.g. ci_run, deploy, review")
    track.add_argument("--ref", required=True, help="the exact run id")
    track.add_argument("--link", default="", help="where a human sees the run")
    track.add_argument("--notify", action="store_true",
                       help="give the job a notify token (shown once) for the CI system to "
                            "report its end: a waiting goal is woken at once")
    status = goal_command("status", "record a tracked job's status", cmd_job_status,
                          job_actions)
    status.add_argument("job_id", metavar="JOB_ID", help="the job_id `job track` returned")
    status.add_argument("--status", required=True,
                        choices=["running", "succeeded", "failed", "cancelled"])
    status.add_argument("--conclusion", default="")

    watchdog = commands.add_parser("watchdog", help="the goal's one watchdog: prepare, "
                                   "cancel, receipt")
    watchdog_actions = watchdog.add_subparsers(dest="watchdog_action", required=True,
                                               metavar="ACTION")
    prepare = goal_command("prepare", "ensure the watchdog (idempotent); for a host "
                           "scheduler, the answer is the schedule to create", cmd_watchdog_prepare,
                           watchdog_actions)
    prepare.add_argument("--tzid", help="IANA zone the host schedule runs in")
    goal_command("cancel", "cancel the watchdog", cmd_watchdog_cancel, watchdog_actions)
    receipt = goal_command("receipt", "record what the host did with the watchdog",
                           cmd_watchdog_receipt, watchdog_actions)
    receipt.add_argument("--status", required=True,
                         choices=["created", "create_failed", "create_uncertain", "cancelled",
                                  "disabled", "user_attested_deleted"])
    receipt.add_argument("--host-ref", help="the host's task id (stored as a digest only)")
    receipt.add_argument("--due-at", help="the next run, ISO 8601 with offset")
    receipt.add_argument("--runs-on", choices=["cloud", "local", "unverified"])
    receipt.add_argument("--verified", action="store_true",
                         help="the host proved where the task runs")
    receipt.add_argument("--attested-by")
    receipt.add_argument("--note")

    claim = goal_command("claim", "claim a wake (what a host-fired task runs first); "
                         "exit 0 with a saved lease, 8 when there is nothing to do", cmd_claim)
    claim.add_argument("--occurrence-id", help="the host run's id: the same id twice is "
                       "one claim")
    claim.add_argument("--reason", choices=["timeout_recovery", "rate_limit_reset",
                                            "dependency_ready", "scheduled_progress"])

    goal_command("show", "the goal's state", cmd_show)
    goal_command("resume", "the resume packet", cmd_resume)
    goal_command("contract", "the smart-wake checkpoint contract", cmd_contract)
    events = goal_command("events", "the goal's events, in order", cmd_events)
    events.add_argument("--after", type=int, help="only events after this seq")
    events.add_argument("--limit", type=int)
    goals = commands.add_parser("goals", help="list the goals you may see")
    for name in ("status", "reason", "workspace", "agent", "cursor"):
        goals.add_argument(f"--{name}")
    goals.add_argument("--page-size", type=int)
    goals.set_defaults(run=cmd_goals)
    commands.add_parser("alerts", help="goals that need a human").set_defaults(run=cmd_alerts)

    def serve_mcp(_args: argparse.Namespace) -> Any:
        from api import mcp_server  # lazily: only this command needs the `mcp` package
        sys.exit(mcp_server.main())

    commands.add_parser("mcp", help="serve these calls as MCP tools over stdio "
                        "(docs/agents.md)").set_defaults(run=serve_mcp)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    code = EXIT_OK
    try:
        try:
            output = args.run(args)
        except CliError as error:
            code, output = error.exit_code, error.body
            print(f"wakeledger: {error}", file=sys.stderr)
        if output is not None or code == EXIT_OK:
            print(json.dumps(output, indent=2))
            sys.stdout.flush()  # here, where a closed pipe can still be caught
    except BrokenPipeError:
        # The reader went away (`wakeledger events | head`): leave quietly
        # with the call's own exit code. Python would hit the closed pipe
        # again flushing stdout at exit, so point it at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
