"""``wakeledger hook claude-code``: Claude Code's hooks, a model-free observer.

Claude Code runs it with one hook event as JSON on stdin (``session_id``,
``cwd``, ``hook_event_name``, and per event its own fields). It acts on four:

- ``SessionStart``: find or start the goal bound to the session (the goal
  ``WAKELEDGER_GOAL_ID`` names, as a wake's command dispatcher sets it, or the
  one this session started before, or a new one: session key = the session
  id, workspace = ``cwd``), take or resume its lease, and print the
  ``additionalContext`` the model reads: the goal, its latest checkpoint, next
  actions and done criteria, and how to record work. Never the lease token.
  A resumed session our dispatcher did not start (``source: resume``, no
  lease in the environment: Claude Code's own continue at a usage limit's
  reset, or a person) first says the host continued it
  (``POST goals/{id}/continuations``): the reset's one continuation takes
  the lease; one that another continuation of the reset beat is told to
  stand down.
- ``UserPromptSubmit``: take the lease again at the start of a turn when the
  last turn's end gave it back (an interactive session's next prompt, or the
  host's own continue), saying first that the host continued; a prompt that
  would be a second continuation of a reset is refused (``decision: block``).
- ``StopFailure``: report the run's end through the run-report endpoint, as
  a class and a reset only (``runend``): a usage limit pauses the goal until
  its reset, and the reset's wake resumes this session. A failure that did
  not end the turn (a subagent's, a helper query's: ``claude_transcript.
  failure_scope``) is a note on the goal instead, and pauses nothing. Claude Code 2.1.332's
  print mode kills this hook as it exits: ``claude_transcript`` reads the
  same end from the session's transcript (``claude-run``, and the next
  ``SessionStart`` here), each end reported once.
- ``Stop`` / ``SessionEnd``: release the lease at the end of the turn (the
  goal stays active, its watchdog armed), unless the goal finished.

It must never stand in the session's way: every failure (no server, a bad
token, bad input) is one line on stderr and exit 0, and each call has a short
timeout (``WAKELEDGER_HOOK_TIMEOUT``, 3 s, two attempts).
"""

import contextlib
import os
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from ledger.domain.vocabulary import TERMINAL_STATUSES, packet_lines
from wakeledger_agent import claude_transcript as transcript
from wakeledger_agent import hookrun, runend
from wakeledger_agent.claude_settings import continues_by_itself
from wakeledger_agent.client import ApiError, Client
from wakeledger_agent.errors import CliError
from wakeledger_agent.leases import FileLeases, write_private

AGENT_ID = "claude-code"
# A lease that can never work again: forget it.
LEASE_ENDING = ("lease_lost", "lease_required", "goal_terminal")


class Hook:
    """One hook event's work: the API, the lease store, the session."""

    def __init__(self, api: Client, leases: FileLeases, event: dict[str, Any]):
        self.api, self.leases, self.event = api, leases, event
        self.session_id = _text(event, "session_id")

    def goal(self) -> str | None:
        return os.environ.get("WAKELEDGER_GOAL_ID") or self.leases.session_goal(self.session_id)

    def session(self) -> dict[str, str]:
        return {"agent_id": AGENT_ID, "session_key": self.session_id,
                "session_id": self.session_id}

    # ------------------------------------------------------------ SessionStart

    def session_start(self) -> dict[str, Any]:
        goal_id = self.goal()
        self._adopt_dispatched_lease(goal_id)
        if goal_id is None:
            try:
                goal_id, lease_note = self._start_goal()
            except ApiError as error:
                if error.code != "workspace_bound":
                    raise
                return self._untracked(str(error))
        elif self._host_continues():
            lease_note = self._continued(goal_id, "session_start") or self._take_lease(goal_id)
        else:
            lease_note = self._take_lease(goal_id)
        self.leases.bind_session(self.session_id, goal_id)
        self.leases.set_current(goal_id)
        transcript.remember_transcript(self.leases, self.session_id, self._transcript(),
                                       str(self.event.get("cwd") or ""))
        lease_note = self._settle_earlier_end(goal_id) or lease_note
        packet = self.api.call("GET", f"goals/{goal_id}/resume")
        return {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                       "additionalContext": context(goal_id, packet,
                                                                    lease_note)}}

    def _untracked(self, refusal: str) -> dict[str, Any]:
        """A new session (after /clear, or a second window) in a workspace that
        an earlier session's goal still holds: say so where the model and the
        user read it, instead of one stderr line nobody sees. Not attached to
        that goal on our own: it is registered to the earlier session, which
        its wake resumes, and a run reported from this one would block it
        (SESSION_CHANGED)."""
        cwd = _text(self.event, "cwd")
        holder = self._workspace_holder(cwd)
        # claude-run reads what this hook did from the state folder (it is not
        # told otherwise): a declined session is recorded with the goal that
        # holds the folder, so its last line names that goal instead of
        # saying that no hook ran.
        transcript.remember_untracked(self.leases, self.session_id, cwd, holder)
        log(f"SessionStart: this session is not tracked: {refusal}"
            + (f" (held by {transcript.goal_name(holder)})" if holder else ""))
        held = (f"the goal {transcript.goal_name(holder)}" if holder
                else f"an active goal (`wakeledger goals --workspace {cwd}` lists it)")
        note = (f"Wake Ledger does not track this session: {refusal}. An earlier session in "
                f"this workspace (before /clear, or another window) still has {held}; "
                f"its watchdog resumes it in that session (`wakeledger goals --workspace "
                f"{cwd}` lists it). To carry it on here, "
                f"restart with WAKELEDGER_GOAL_KEY set to its goal key; to start new work, "
                f"finish or stop it first. Nothing this session does is recorded until then.")
        return {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                       "additionalContext": note}}

    def _workspace_holder(self, cwd: str) -> dict[str, str] | None:
        """This agent's active goal bound to ``cwd`` (its id and key), the one
        the start was refused for; None when it cannot be read (the refusal is
        still told, without the name)."""
        try:
            page = self.api.call("GET", "goals", query={"workspace": cwd})
        except (ApiError, CliError):
            return None
        for goal in page.get("results", []) if isinstance(page, dict) else []:
            if goal.get("workspace_bound") and goal.get("status") not in TERMINAL_STATUSES:
                return {"id": str(goal.get("id", "")), "goal_key": str(goal.get("goal_key", ""))}
        return None

    def _host_continues(self) -> bool:
        """This session was continued by Claude Code or a person (``claude
        --resume``, an auto-continue at a usage limit's reset), not by our
        own wake's dispatcher (which hands its lease over in the environment)."""
        return (self.event.get("source") == "resume"
                and not os.environ.get("WAKELEDGER_LEASE_TOKEN"))

    def _continued(self, goal_id: str, trigger: str) -> str:
        """Tell the ledger the host continued the session: "" when it was no
        reset's continuation (take the lease as before), else what the model
        reads. A stand-down is remembered for this session's next prompt,
        which is then refused (one record per losing run)."""
        if self.leases.get(goal_id) is not None:
            return ""
        answer = self.api.call("POST", f"goals/{goal_id}/continuations",
                               {"host": AGENT_ID, "trigger": trigger,
                                "session_key": self.session_id})
        outcome = answer.get("outcome")
        log(f"{self.event['hook_event_name']}: goal {goal_id}: {outcome}")
        if outcome == "host_continued" and answer.get("lease"):
            self.leases.save(goal_id, answer["lease"])
            return (f"This session continues the goal after its usage limit's reset and holds "
                    f"its lease (generation {answer['lease']['generation']}).")
        if outcome == "stood_down":
            _stand_down(self.leases, self.session_id, goal_id)
            return (f"Wake Ledger: {answer.get('notes')}. Do not work on goal {goal_id} in "
                    "this session now; end the turn.")
        return ""

    def _adopt_dispatched_lease(self, goal_id: str | None) -> None:
        """A wake's command dispatcher hands its lease over in the environment:
        keep it in the lease store, where the CLI and the MCP server find it."""
        token = os.environ.get("WAKELEDGER_LEASE_TOKEN")
        generation = os.environ.get("WAKELEDGER_LEASE_GENERATION", "")
        if goal_id and token and generation.isdigit():
            self.leases.save(goal_id, {"token": token, "generation": int(generation)})

    def _start_goal(self) -> tuple[str, str]:
        cwd = _text(self.event, "cwd")
        body: dict[str, Any] = {
            "goal_key": os.environ.get("WAKELEDGER_GOAL_KEY") or f"claude-code-{self.session_id}",
            "workspace": cwd,
            "objective": os.environ.get("WAKELEDGER_OBJECTIVE") or f"Claude Code session in {cwd}",
            "done_criteria": _lines(os.environ.get("WAKELEDGER_DONE", "")),
            "session": self.session(),
        }
        policy: dict[str, Any] = {}
        if os.environ.get("WAKELEDGER_DISPATCH"):
            policy["dispatch"] = os.environ["WAKELEDGER_DISPATCH"]
        if continues_by_itself(cwd):
            # The reset's wake gives Claude Code's own continue a grace first.
            policy["host_continues"] = True
        if policy:
            body["policy"] = policy
        answer = self.api.call("POST", "goals", body)
        goal_id = answer["goal"]["id"]
        return goal_id, self._keep(goal_id, answer)

    def _take_lease(self, goal_id: str) -> str:
        held = self.leases.get(goal_id)
        if held is not None:
            return f"This session holds the goal's lease (generation {held['generation']})."
        return self._keep(goal_id, self.api.call("POST", f"goals/{goal_id}/lease", {}))

    def _keep(self, goal_id: str, answer: dict[str, Any]) -> str:
        if answer.get("acquired"):
            self.leases.save(goal_id, answer["lease"])
            return (f"This session holds the goal's lease (generation "
                    f"{answer['lease']['generation']}).")
        if self.leases.get(goal_id) is not None:
            return "This session holds the goal's lease."
        return (f"This session holds no lease: {answer.get('next_required_action')}"
                + (f", retry after {answer['retry_after_seconds']} s"
                   if answer.get("retry_after_seconds") else "")
                + ". Do not work on the goal until `wakeledger lease` grants one.")

    def prompt_submit(self) -> dict[str, Any] | None:
        goal_id = self.goal()
        if goal_id is None or self.leases.get(goal_id) is not None:
            return None  # no goal bound (SessionStart said why), or the lease is held
        # A prompt on a session without its lease: the host's own continue at
        # a usage limit's reset (interactive), or a person. Another
        # continuation of that reset came first: the prompt is refused, so
        # one continuation runs (the person reads why).
        down = _stood_down(self.leases, self.session_id, goal_id)
        if not down and not os.environ.get("WAKELEDGER_LEASE_TOKEN"):
            down = self._continued(goal_id, "prompt").startswith("Wake Ledger:")
            _stood_down(self.leases, self.session_id, goal_id)
        if down:
            return {"decision": "block",
                    "reason": f"Wake Ledger: goal {goal_id} was continued already after its "
                              "usage limit's reset; this prompt would be a second "
                              "continuation of it (`wakeledger show` tells its state)."}
        if self.leases.get(goal_id) is not None:
            return None  # the host's continuation of the reset: the lease is ours
        note = self._take_lease(goal_id)
        if self.leases.get(goal_id) is not None:
            return None
        return {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                       "additionalContext": f"Wake Ledger goal {goal_id}: "
                                                            f"{note}"}}

    # ------------------------------------------------------------ the end of a turn

    def stop_failure(self) -> None:
        goal_id = self.goal()
        if goal_id is None:
            return
        text = "\n".join(str(self.event.get(key) or "")
                         for key in ("error_details", "last_assistant_message"))
        # The transcript has this end already (Claude Code writes it before the
        # hook): its uuid keeps claude-run or the next SessionStart from
        # reporting it a second time.
        end = transcript.last_turn_end(self._transcript())
        scope = transcript.failure_scope(self.event, end)
        if scope:
            self._note(goal_id, scope, _optional(self.event, "error"), text)
            return
        uuid = end.uuid if end is not None and end.failed else ""
        self._report(goal_id, _optional(self.event, "error"), text, datetime.now(UTC), uuid)

    def _note(self, goal_id: str, scope: str, error: str | None, text: str) -> None:
        """A failure the turn went on through: a note on the goal under the
        lease the turn holds, never a pause. Without the lease (the turn ended
        meanwhile and gave it back) there is nothing to note it under: the
        turn's own end was reported, or was clean."""
        with self.leases.locked(goal_id):
            lease = self.leases.get(goal_id)
            if lease is None:
                log(f"StopFailure: goal {goal_id}: a {scope} after the turn's lease was "
                    "given back; not noted")
                return
            body = runend.note_report(scope, error, text, now=datetime.now(UTC),
                                      tz=os.environ.get("TZ") or "UTC")
            answer = self._fenced(goal_id, "runs", body, lease)
            log(f"StopFailure: goal {goal_id} {answer.get('status')}: noted {scope} "
                f"({answer.get('classification')}), the turn goes on")

    def _report(self, goal_id: str, error: str | None, text: str, at: datetime,
                uuid: str) -> dict[str, Any] | None:
        """Report a failed end, once: under the goal's lock, unless its
        transcript entry (``uuid``) was accounted for already."""
        with self.leases.locked(goal_id):
            if uuid and transcript.accounted(self.leases, self.session_id) == uuid:
                return None
            lease = self.leases.get(goal_id) or self._lease_to_report(goal_id)
            if lease is None:
                return None
            body = runend.run_report(error, text, now=at, tz=os.environ.get("TZ") or "UTC")
            answer = self._fenced(goal_id, "runs", {**body, "session": self.session()}, lease)
            if uuid:
                transcript.account(self.leases, self.session_id, uuid)
            if answer.get("status") != "running":
                self.leases.forget(goal_id)  # a reported failure ended the lease
            log(f"{self.event['hook_event_name']}: goal {goal_id} {answer.get('status')} "
                f"({answer.get('classification')}"
                + (f", until {answer['paused_until']})" if answer.get("paused_until") else ")"))
            return answer

    def note_wait(self, body: dict[str, Any]) -> bool:
        """``claude-run``: the run waits inside Claude Code's retry watchdog
        for the provider's reset; noted under the lease the turn holds."""
        goal_id = self.goal()
        with self.leases.locked(goal_id) if goal_id else contextlib.nullcontext():
            lease = self.leases.get(goal_id) if goal_id else None
            if goal_id is None or lease is None:
                return False
            self._fenced(goal_id, "runs", body, lease)
            log(f"claude-run: goal {goal_id} waits for its provider until "
                f"{body['retry_after']}")
            return True

    def renew(self) -> None:
        """``claude-run``, while the run waits for its provider: a heartbeat."""
        goal_id = self.goal()
        lease = self.leases.get(goal_id) if goal_id else None
        if goal_id and lease is not None:
            self._fenced(goal_id, "lease/heartbeat", {}, lease)

    def _transcript(self) -> str:
        path = self.event.get("transcript_path")
        return path if isinstance(path, str) else ""

    def _settle_earlier_end(self, goal_id: str) -> str:
        """SessionStart: the session's last turn ended in a rate limit that no
        hook reported (``claude -p`` of Claude Code 2.1.332 kills them) and
        whose reset is still ahead: report it now, which pauses the goal. An
        older or other failure is only marked as seen (the human is back)."""
        end = transcript.unreported(self.leases, self.session_id, self._transcript())
        if end is None:
            return ""
        tz = os.environ.get("TZ") or "UTC"
        if not transcript.still_ahead(end, datetime.now(UTC), tz):
            transcript.account(self.leases, self.session_id, end.uuid)
            return ""
        answer = self._report(goal_id, end.error, end.text, end.at, end.uuid)
        if not answer or answer.get("status") != "paused":
            return ""
        return (f"This session holds no lease: its last turn met a usage limit, and the goal "
                f"is paused until {answer['paused_until']}, when its wake resumes this "
                f"session. Do not work on the goal until `wakeledger lease` grants one.")

    def after_exit(self) -> None:
        """``claude-run``, once claude has exited: report the transcript's
        failed end if no hook did, then give back a lease the turn's killed
        ``SessionEnd`` left held."""
        goal_id = self.goal()
        if goal_id is None:
            return
        end = transcript.unreported(self.leases, self.session_id, self._transcript())
        if end is not None:
            self._report(goal_id, end.error, end.text, end.at, end.uuid)
        self.end_of_turn()

    def _lease_to_report(self, goal_id: str) -> dict[str, Any] | None:
        """The turn's own SessionEnd may have released the lease first (Claude
        Code does not wait for StopFailure): take it back, only to report how
        the turn ended. Refused (another holder, a pause, a terminal goal), the
        report is not ours to make."""
        answer = self.api.call("POST", f"goals/{goal_id}/lease", {})
        if not answer.get("acquired"):
            log(f"StopFailure: goal {goal_id}: no lease to report the run with "
                f"({answer.get('next_required_action')})")
            return None
        self.leases.save(goal_id, answer["lease"])
        return self.leases.get(goal_id)  # the proof alone, as every fenced call sends it

    def end_of_turn(self) -> None:
        goal_id = self.goal()
        if goal_id is None:
            return
        with self.leases.locked(goal_id):
            lease = self.leases.get(goal_id)
            if lease is None:
                return  # finished, reported, or never held: nothing to give back
            self._fenced(goal_id, "lease/release", {}, lease)
            self.leases.forget(goal_id)

    def _fenced(self, goal_id: str, path: str, body: dict[str, Any],
                lease: dict[str, Any]) -> dict[str, Any]:
        return hookrun.fenced(self.api, self.leases, goal_id, path, body, lease, LEASE_ENDING)


# ---------------------------------------------------------------- what the model reads


def context(goal_id: str, packet: dict[str, Any], lease_note: str) -> str:
    """The SessionStart context: where the work stands and how to record it."""
    lines = [
        f"Wake Ledger goal {goal_id} is bound to this session: {packet.get('objective', '')}",
        # Where the work stands, worded as every resumed agent reads it.
        *packet_lines(packet),
    ]
    lines += [
        lease_note + " The hooks keep it: never ask for it or print it.",
        f"Record each verified step with the MCP tool checkpoint_goal (goal_id {goal_id}) or "
        f"`wakeledger checkpoint --goal {goal_id} --step TEXT --progress N --next TEXT`; "
        f"finish with finish_goal or `wakeledger finish --goal {goal_id} --status completed "
        "--summary TEXT --evidence CRITERION=EVIDENCE` (one per done criterion).",
        "At the end of each turn the hooks release the lease and take it again at your next "
        "prompt; when a usage limit stops you, they report it and a wake resumes this "
        "session after the reset.",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- a stand-down


def _stand_down(leases: FileLeases, session_id: str, goal_id: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        write_private(leases._session_path(session_id).with_suffix(".stood-down"), goal_id)


def _stood_down(leases: FileLeases, session_id: str, goal_id: str) -> bool:
    """Whether SessionStart stood this session down; read once (the next prompt)."""
    path = leases._session_path(session_id).with_suffix(".stood-down")
    try:
        found = path.read_text().strip() == goal_id
        path.unlink()
    except (OSError, ValueError):
        return False
    return found


# ---------------------------------------------------------------- the event


def _text(event: dict[str, Any], key: str) -> str:
    value = event.get(key)
    if not isinstance(value, str) or not value:
        raise CliError(2, f"the hook event has no {key}")
    return value


def _optional(event: dict[str, Any], key: str) -> str | None:
    value = event.get(key)
    return value if isinstance(value, str) else None


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def log(message: str) -> None:
    # StopFailure runs detached (Claude Code does not wait for it): in a
    # headless run the CLI may have exited and closed our stderr by now.
    with contextlib.suppress(OSError):
        print(f"wakeledger hook: {message}", file=sys.stderr, flush=True)


HANDLERS = {
    "SessionStart": Hook.session_start,
    "UserPromptSubmit": Hook.prompt_submit,
    "StopFailure": Hook.stop_failure,
    "Stop": Hook.end_of_turn,
    "SessionEnd": Hook.end_of_turn,
}


def main(source: TextIO | None = None) -> int:
    """Exit 0 whatever happens: a hook that fails must not stop the session
    (a StopFailure or SessionStart hook's exit code 2 would mean something)."""
    return hookrun.run_hook(source, what="one Claude Code hook event",
                            name_field="hook_event_name",
                            hook=lambda api, event: Hook(api, FileLeases(), event),
                            handlers=HANDLERS, log=log, goes_on="the session")
