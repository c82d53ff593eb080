"""How a Claude Code turn ended, read from the session's transcript, and
``wakeledger claude-run``: a ``claude`` run whose end is reported even when
its hooks are not.

Why: Claude Code 2.1.332 in print mode (``claude -p``) prints a 429, exits
and kills its ``StopFailure`` and ``SessionEnd`` hooks within milliseconds
(2.1.197 waited for them): the limit was never reported and the goal stayed
``waiting`` for its hourly watchdog. Both versions write the failed turn to
the session's JSONL transcript first (``~/.claude/projects/<cwd>/<session>.jsonl``,
an ``assistant`` entry with ``isApiErrorMessage``, the ``error`` value the
hook would get, and the displayed text), so the end is read from there at the
next contact instead of from a hook that must outlive the exit:

- ``claude-run`` (scripts, CI, the ``--resume`` dispatcher): runs ``claude``,
  then reads the transcript and reports an unreported failed end at once,
  and gives back a lease the killed ``SessionEnd`` left held;
- the next ``SessionStart`` of the session (an interactive ``--resume``, a
  watchdog's dispatched run): a rate limit whose reset, read from the time
  the limit was met, still lies ahead is reported then; anything older is
  history (the human is back, or the limit has lifted).

While ``claude`` runs, ``claude-run`` also reads a wait inside Claude Code's
retry watchdog from the transcript (``provider_wait``): the goal shows it, and
the lease is renewed while it lasts.

One end is reported once: the transcript entry's uuid, once accounted for,
is kept in the lease store (``sessions/<session>.end``). The text is read on
this machine and only the class and the reset are sent (``runend``).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ledger.domain.runs import HELPER_FAILURE, SUBAGENT_FAILURE
from wakeledger_agent import runend
from wakeledger_agent.leases import FileLeases, write_private

# A transcript grows with the session (tens of MB for a long one): only its
# tail is read, and the turn's end is in its last entries.
TAIL_BYTES = 1 << 20


@dataclass(frozen=True)
class TurnEnd:
    """The last turn's end as the transcript has it."""

    uuid: str
    at: datetime  # when Claude Code wrote it: a reset is read from here
    failed: bool  # an API error ended the turn
    error: str | None  # Claude Code's own class (rate_limit, authentication_failed, …)
    text: str  # the displayed error: read here, never sent


def _tail_lines(path: Path) -> list[str]:
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - TAIL_BYTES))
        data = handle.read()
    lines = data.decode("utf-8", errors="replace").splitlines()
    return lines[1:] if size > TAIL_BYTES else lines  # the first may be cut


def _instant(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _text(message: object) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(block.get("text") or "") for block in content
                         if isinstance(block, dict) and block.get("type") == "text")
    return ""


def _newest_first(path: str | Path | None) -> Iterator[dict[str, Any]]:
    """The transcript's last entries that parse as JSON objects, newest first;
    nothing without a transcript to read."""
    if not path:
        return
    try:
        lines = _tail_lines(Path(path))
    except OSError:
        return
    for line in reversed(lines):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            yield entry


def last_turn_end(path: str | Path | None) -> TurnEnd | None:
    """The last conversation entry of the main thread (not a subagent's), as
    a turn's end: failed when it is Claude Code's API error message. None
    without a transcript or an entry to read. Never raises."""
    for entry in _newest_first(path):
        if (entry.get("type") not in ("user", "assistant")
                or entry.get("isSidechain") or entry.get("isMeta")):
            continue
        at = _instant(entry.get("timestamp"))
        uuid = entry.get("uuid")
        if at is None or not isinstance(uuid, str):
            return None
        failed = entry.get("type") == "assistant" and entry.get("isApiErrorMessage") is True
        error = entry.get("error")
        return TurnEnd(uuid, at, failed, error if isinstance(error, str) else None,
                       _text(entry.get("message")) if failed else "")
    return None


# ---------------------------------------------------------------- a wait inside the process


def provider_wait(path: str | Path | None) -> tuple[str, datetime] | None:
    """(entry uuid, until) when the main thread's last entry is Claude Code
    retrying a rate-limited request (its retry watchdog: ``system`` /
    ``api_error`` with ``retryInMs``, as 2.1.332 writes it): the run waits
    in the process until then. None when it moved on, or without one."""
    for entry in _newest_first(path):
        if entry.get("isSidechain"):
            continue
        if entry.get("type") in ("user", "assistant"):
            return None  # the conversation went on after any retry
        error = entry.get("error")
        if (entry.get("type") != "system" or entry.get("subtype") != "api_error"
                or not isinstance(error, dict) or error.get("status") != 429):
            continue
        at, retry, uuid = _instant(entry.get("timestamp")), entry.get("retryInMs"), \
            entry.get("uuid")
        if at is None or not isinstance(uuid, str) or not isinstance(retry, int | float) \
                or isinstance(retry, bool) or not 0 < retry < 8 * 24 * 3600e3:
            return None
        return uuid, at + timedelta(milliseconds=retry)
    return None


# ---------------------------------------------------------------- whose failure


def failure_scope(event: dict[str, Any], end: TurnEnd | None) -> str:
    """Whose failure a ``StopFailure`` hook reports: "" when it ended the main
    turn (the goal pauses, blocks or fails by its class), else the note it is
    (``ledger.domain.runs``), recorded without a pause. The one place this is
    decided. Claude Code 2.1.332 raises StopFailure on the parent's
    ``session_id`` for a subagent's failed request too (anthropics/claude-code#91419)
    while the main turn goes on:

    - ``agent_id`` in the event: Claude Code sets it only when the hook fires
      from within a subagent (its hook input schema: "Absent for the main
      thread"); the subagent's error is in its own transcript
      (``<session>/subagents/agent-<id>.jsonl``), not the main one;
    - else the main transcript's last conversation entry is no API error
      (Claude Code writes the main turn's failed end before its hook): the
      main turn is going on, and the failure was a helper query's;
    - no transcript to read: the hook's word is all there is, the turn ended.
    """
    if isinstance(event.get("agent_id"), str) and event["agent_id"]:
        return SUBAGENT_FAILURE
    if end is not None and not end.failed:
        return HELPER_FAILURE
    return ""


# ---------------------------------------------------------------- what was accounted for


def _marker(leases: FileLeases, session_id: str) -> Path:
    return leases._session_path(session_id).with_suffix(".end")


def accounted(leases: FileLeases, session_id: str) -> str:
    with contextlib.suppress(OSError, ValueError):
        return _marker(leases, session_id).read_text().strip()
    return ""


def account(leases: FileLeases, session_id: str, uuid: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        write_private(_marker(leases, session_id), uuid)


def remember_transcript(leases: FileLeases, session_id: str, path: str, cwd: str) -> None:
    """Where the session's transcript is (the hooks are told; claude-run is not),
    and that this session is the latest started in ``cwd``."""
    with contextlib.suppress(OSError, ValueError):
        write_private(leases._session_path(session_id).with_suffix(".transcript"), path)
        write_private(leases.root / "last-session", json.dumps([session_id, cwd]))


def remember_untracked(leases: FileLeases, session_id: str, cwd: str,
                       holder: dict[str, str] | None) -> None:
    """The hook ran in ``cwd`` and declined the session: another goal of this
    agent holds the folder (``holder``: its id and key, when it could be read)."""
    with contextlib.suppress(OSError, ValueError):
        write_private(leases.root / "last-session",
                      json.dumps([session_id, cwd, {"untracked": True, "held_by": holder}]))


def goal_name(holder: dict[str, str]) -> str:
    """``'fix-login' (1a86455a)``: a goal as a person finds it again."""
    return f"{holder.get('goal_key', '')!r} ({holder.get('id', '')[:8]})"


def transcript_of(leases: FileLeases, session_id: str) -> str:
    with contextlib.suppress(OSError, ValueError):
        return leases._session_path(session_id).with_suffix(".transcript").read_text().strip()
    return ""


def unreported(leases: FileLeases, session_id: str, path: str | None) -> TurnEnd | None:
    """The transcript's failed end not yet accounted for, else None."""
    end = last_turn_end(path)
    if end is None or not end.failed or accounted(leases, session_id) == end.uuid:
        return None
    return end


def still_ahead(end: TurnEnd, now: datetime, tz: str) -> bool:
    """At a later contact: is this end a rate limit whose reset, read from
    when the limit was met ("resets 3am" is the 3am after that), is still
    ahead? Only such an end is worth a pause now; any other is history."""
    if runend.failure_class(end.error, end.text) != runend.RATE_LIMIT:
        return False
    body = runend.run_report(end.error, end.text, now=end.at, tz=tz)
    reset = _instant(body["retry_after"])
    return reset is not None and reset > now


def settle_goal(goal_id: str) -> None:
    """Before a host's claim of the goal's wake (``wakeledger claim``): a Claude
    Code session bound to the goal here whose last turn met a rate limit no
    hook reported, its reset still ahead, is reported first (the goal pauses,
    and the claim finds nothing to do). Quiet and harmless without sessions."""
    from wakeledger_agent import claude_hook, client

    leases = FileLeases()
    with contextlib.suppress(OSError):
        for bound in sorted((leases.root / "sessions").glob("*")):
            if bound.suffix or not bound.is_file() or bound.read_text().strip() != goal_id:
                continue
            event = {"session_id": bound.name, "hook_event_name": "claim",
                     "transcript_path": transcript_of(leases, bound.name)}
            if unreported(leases, bound.name, event["transcript_path"]) is None:
                continue
            try:
                claude_hook.Hook(client.from_env(), leases, event)._settle_earlier_end(goal_id)
            except Exception as error:  # the claim goes on: the server decides
                claude_hook.log(f"claim: the session's last end was not reported ({error})")


# ---------------------------------------------------------------- claude-run


def _named_session(argv: list[str]) -> str:
    """The session ``--resume ID`` / ``-r ID`` / ``--session-id ID`` names."""
    for i, word in enumerate(argv[:-1]):
        if word in ("--resume", "-r", "--session-id") and not argv[i + 1].startswith("-"):
            return argv[i + 1]
        for flag in ("--resume=", "--session-id="):
            if word.startswith(flag):
                return word[len(flag):]
    return ""


def _hook_record(leases: FileLeases, since: float, cwd: str) -> list[Any]:
    """What a SessionStart hook recorded during this run, in this directory
    (``[session, cwd]``, or ``[session, cwd, {"untracked": …}]`` when it declined
    the session), else []: another project's claude, started meanwhile, is
    not ours to settle (its lease is still in use)."""
    path = leases.root / "last-session"
    with contextlib.suppress(OSError, ValueError, TypeError):
        if path.stat().st_mtime >= since:
            record = json.loads(path.read_text())
            if isinstance(record, list) and len(record) >= 2 and record[1] == cwd \
                    and isinstance(record[0], str):
                return record
    return []


def _started_session(leases: FileLeases, since: float, cwd: str) -> str:
    """The session a SessionStart hook started or resumed a goal for during
    this run, in this directory. One directory has one active goal."""
    record = _hook_record(leases, since, cwd)
    return record[0] if len(record) == 2 else ""


def _no_session_said(leases: FileLeases, since: float, cwd: str) -> str:
    """Why no session is reported: the hook declined it (the folder is held
    by another goal, named when the hook could read it), or no hook ran."""
    record = _hook_record(leases, since, cwd)
    if len(record) < 3 or not isinstance(record[2], dict):
        return "no session was started (no SessionStart hook ran)"
    holder = record[2].get("held_by")
    held = (f"the goal {goal_name(holder)}" if isinstance(holder, dict)
            else "another active goal")
    return (f"the session was not tracked: the folder {cwd} is held by {held}; finish or "
            "stop it, or run with WAKELEDGER_GOAL_KEY set to its key to carry it on")


# How often claude-run looks at the transcript for a wait inside the process,
# and renews the lease while one lasts (a hook's lease is renewed by nothing
# else meanwhile: an hours-long wait would let it lapse, a "silent" holder).
WATCH_SECONDS = 5.0
RENEW_SECONDS = 30.0


class Waiting:
    """``claude-run`` while ``claude`` runs: a retry-watchdog wait the
    transcript shows (``provider_wait``) is reported once per longer wait as
    a ``provider_wait`` note, and the lease is renewed while it lasts. Quiet
    without a session, a transcript or a held lease; never fails the run."""

    def __init__(self, leases: FileLeases, argv: list[str], since: float):
        self.leases, self.argv, self.since = leases, argv, since
        self.until: datetime | None = None
        self.renewed = 0.0

    def look(self) -> None:
        from wakeledger_agent import claude_hook, hookrun, hostwait

        session = _named_session(self.argv) or _started_session(self.leases, self.since,
                                                                  os.getcwd())
        wait = provider_wait(transcript_of(self.leases, session)) if session else None
        now = datetime.now(UTC)
        if wait is None or wait[1] - now < hostwait.MIN_WAIT:
            return
        event = {"session_id": session, "hook_event_name": "claude-run"}
        try:
            hook = claude_hook.Hook(hookrun.hook_client(), self.leases, event)
            if self.until is None or wait[1] > self.until:
                if hook.note_wait(runend.wait_report(runend.RATE_LIMIT, wait[1])):
                    self.until, self.renewed = wait[1], time.monotonic()
            elif time.monotonic() - self.renewed >= RENEW_SECONDS:
                hook.renew()
                self.renewed = time.monotonic()
        except Exception as error:  # the run goes on whatever the server says
            claude_hook.log(f"claude-run: the provider wait was not recorded ({error})")


def run(argv: list[str]) -> int:
    """Run ``claude`` (its output passed through), then settle its end from the
    transcript; exit with claude's own status. Never fails for Wake Ledger's
    sake: a server that is down is one line on stderr."""
    from wakeledger_agent import claude_hook, hookrun  # the hook's own machinery

    if not argv:
        print("wakeledger claude-run: give the claude command after --", file=sys.stderr)
        return 2
    leases = FileLeases()
    since = time.time() - 1  # the file system's clock is coarse
    try:
        child = subprocess.Popen(argv)  # noqa: S603 - the user's own command, no shell
    except OSError as error:
        print(f"wakeledger claude-run: cannot run {argv[0]}: {error.strerror}", file=sys.stderr)
        return 127
    waiting = Waiting(leases, argv, since)
    try:
        while True:
            try:
                code = child.wait(timeout=WATCH_SECONDS)
                break
            except subprocess.TimeoutExpired:
                waiting.look()
    except KeyboardInterrupt:  # as subprocess.call did: the child goes with us
        child.kill()
        child.wait()
        return 130
    session = _named_session(argv) or _started_session(leases, since, os.getcwd())
    if not session:
        claude_hook.log(f"claude-run: {_no_session_said(leases, since, os.getcwd())}")
        return code
    event: dict[str, Any] = {"session_id": session, "hook_event_name": "claude-run",
                             "cwd": os.getcwd(), "transcript_path": transcript_of(leases, session)}
    try:
        claude_hook.Hook(hookrun.hook_client(), leases, event).after_exit()
    except Exception as error:  # never the run's failure: say what, keep claude's status
        claude_hook.log(f"claude-run: the run's end was not reported ({error})")
    return code
