"""What each ``wakeledger`` command does: one API call (or two), the lease
kept in the local lease store, and the answer printed with its token redacted.
"""

import argparse
import hashlib
import sys
import urllib.parse
from pathlib import Path
from typing import Any

from wakeledger_agent import client
from wakeledger_agent.errors import (
    EXIT_CONFLICT,
    EXIT_LEASE_LOST,
    EXIT_TERMINAL,
    EXIT_USAGE,
    CliError,
)
from wakeledger_agent.leases import FileLeases


def call(method: str, path: str, body: dict[str, Any] | None = None,
         query: dict[str, Any] | None = None) -> Any:
    """One API call with the client the environment describes (read at each
    call, so a test or a wrapper may change it between calls)."""
    return client.from_env().call(method, path, body, query)


def leases() -> FileLeases:
    return FileLeases()


# ---------------------------------------------------------------- local state


def load_lease(goal_id: str) -> dict[str, Any]:
    lease = leases().get(goal_id)
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


def current_goal(given: str | None) -> str:
    if given:
        return given
    current = leases().current()
    if current is None:
        raise CliError(EXIT_USAGE, "no current goal: pass --goal ID or run "
                       "`wakeledger start`")
    return current




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
    mine = leases().get(goal_id)
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
        leases().save(goal_id, answer["lease"])
        return _redact(answer)
    leases().set_current(goal_id)
    return _refused(goal_id, answer)


def cmd_lease(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    answer = call("POST", f"goals/{goal_id}/lease", {})
    if not answer["acquired"]:
        return _refused(goal_id, answer)
    leases().save(goal_id, answer["lease"])
    return _redact(answer)


def _fenced(goal_id: str, path: str, body: dict[str, Any], *, method: str = "POST",
            lease_optional: bool = False) -> Any:
    lease = leases().get(goal_id) if lease_optional else load_lease(goal_id)
    try:
        return call(method, f"goals/{goal_id}/{path}",
                    {**({"lease": lease} if lease else {}), **body})
    except CliError as error:
        if error.exit_code in (EXIT_LEASE_LOST, EXIT_TERMINAL):
            leases().forget(goal_id)  # it will never work again
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
        leases().forget(goal_id)
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
    leases().forget(goal_id)
    return answer


def cmd_finish(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    body: dict[str, Any] = {"status": args.status, "summary": args.summary}
    if args.evidence:
        criteria = call("GET", f"goals/{goal_id}").get("done_criteria", [])
        body["evidence"] = [_evidence_item(text, criteria) for text in args.evidence]
    answer = _fenced(goal_id, "finish", body)
    if answer.get("completion_state") != "pending_native_cleanup":
        leases().forget(goal_id)
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
        leases().forget(goal_id)
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
        leases().forget(goal_id)  # the receipt that let a finish complete
    return answer


def cmd_claim(args: argparse.Namespace) -> Any:
    goal_id = current_goal(args.goal)
    # A Claude Code print-mode run may have ended in a limit its killed hook
    # never reported: read it from the session's transcript before claiming.
    from wakeledger_agent.claude_transcript import settle_goal

    settle_goal(goal_id)
    body = {k: v for k, v in (("occurrence_id", args.occurrence_id),
                              ("reason", args.reason)) if v}
    answer = call("POST", f"goals/{goal_id}/claim", body)
    if answer.get("lease"):
        leases().save(goal_id, answer["lease"])
        return _redact(answer)
    leases().set_current(goal_id)
    raise CliError(EXIT_CONFLICT, f"no wake for this turn: {answer.get('outcome')}"
                   + (f" (retry after {answer['retry_after_seconds']} s)"
                      if answer.get("retry_after_seconds") else ""), answer)


def cmd_continued(args: argparse.Namespace) -> Any:
    """The host continued the session by itself: the reset's one continuation
    (the lease saved), or a stand-down (exit 8: do no work in this run)."""
    goal_id = current_goal(args.goal)
    body = {"host": args.host, "trigger": args.trigger,
            **({"session_key": args.session_key} if args.session_key else {})}
    answer = call("POST", f"goals/{goal_id}/continuations", body)
    if answer.get("lease"):
        leases().save(goal_id, answer["lease"])
    leases().set_current(goal_id)
    if answer["outcome"] == "stood_down":
        raise CliError(EXIT_CONFLICT, f"stand down: {answer['notes']}", _redact(answer))
    return _redact(answer)


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
    # One page (count is the total); follow --cursor with the page's "next".
    return call("GET", "alerts", query={"page_size": args.page_size, "cursor": args.cursor})


def _redact(answer: dict[str, Any]) -> dict[str, Any]:
    """The lease token goes to the private file, not to stdout (and the logs
    that capture it)."""
    if answer.get("lease"):
        answer = {**answer, "lease": {**answer["lease"], "token": "(saved)"}}
    return answer
