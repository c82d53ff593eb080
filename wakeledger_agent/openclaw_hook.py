"""``wakeledger hook openclaw``: what the OpenClaw plugin's hooks do.

The plugin (``openclaw_plugin/index.ts``, in the Gateway) runs this with a
few facts of one hook as JSON on stdin and waits for it at most 4 s. Three hooks:

- ``before_prompt_build``: an owner's turn (trigger ``user`` in a direct
  session, no cron/hook/subagent session key, provenance absent or
  ``external_user``, and not the product's own continuation, whose message
  starts with the resume prompt's first words) binds the session to a goal —
  a new one (goal key ``openclaw-<session id>``, session key, session id,
  model, workspace, ``binds: session``: every session of the agent is its
  own goal in the agent's one workspace) or the session's goal again, whose
  lease it takes — and answers the short context note the model reads. A
  turn the server will not track answers a one-line ``notice`` the plugin
  writes into the chat. A continuation in a bound session gets the note and
  no admission; every other turn, nothing.
- ``agent_end``: how an attempt of the run ended: failed or not by its last
  model call's outcome (``callOutcome``, from ``model_call_ended``), else the
  last assistant message's ``stopReason``; the failure's class and reset from
  its ``errorMessage``. OpenClaw
  retries a generic 429 inside one run, each attempt firing agent_end with
  the same runId: a failed attempt is held (as its class and reset only,
  ``runend``: the text is read here and dropped) until the run has ended —
  ``run_settled``, the plugin's word that no other attempt came within its
  settle time, or the session's next run — and then reported; a clean end
  drops what was held and is reported as the run's end, then the lease is
  released. An owner's turn that finished while the goal waited for its
  reset (no lease for us) is reported as session activity: a human went on
  by hand.

Exit 0 whatever happens: one line on stderr (the plugin logs it), never an
error in the turn.
"""

import io
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from ledger.domain.smartwake import resume_prompt
from wakeledger_agent import hookrun, runend
from wakeledger_agent.client import ApiError, Client
from wakeledger_agent.errors import CliError
from wakeledger_agent.leases import FileLeases, write_private

AGENT_ID = "openclaw"
# The product's own continuations start with these words (vocabulary.resume_prompt).
CONTINUATION = resume_prompt({}, "GOAL").split("GOAL")[0]
# Session keys of turns no owner typed: cron jobs, webhook hooks, subagents.
NOT_DIRECT = (":cron:", ":hook:", ":subagent:", ":heartbeat")
LEASE_ENDING = ("lease_lost", "lease_required", "goal_terminal", "goal_blocked")
ACTIVE = ("running", "waiting", "paused")


def owner_turn(facts: dict[str, Any]) -> bool:
    """The seed's admission rules, on what the Gateway tells a plugin."""
    key = str(facts.get("sessionKey") or "")
    return (facts.get("trigger") == "user" and bool(key)
            and not any(mark in key for mark in NOT_DIRECT)
            and facts.get("provenance") in (None, "external_user")
            and not continuation(facts))


def attempt_failed(facts: dict[str, Any]) -> bool:
    """Whether a run's attempt ended on a failure. OpenClaw's
    ``model_call_ended`` says it (``outcome: "error"``) without the
    conversation; after a provider 429 ``agent_end`` says ``success: true``.
    The plugin hands on its last call's outcome as ``callOutcome``; without
    one (a harness that emits no model-call hooks) the last assistant
    message's ``stopReason`` says it. The error text is still read, here
    only, for the failure's class and reset."""
    outcome = facts.get("callOutcome")
    if outcome in ("error", "completed"):
        return outcome == "error"
    return facts.get("stopReason") == "error"


def continuation(facts: dict[str, Any]) -> bool:
    return str(facts.get("prompt") or "").lstrip().startswith(CONTINUATION)


class Hook:
    def __init__(self, api: Client, leases: FileLeases, facts: dict[str, Any]):
        self.api, self.leases, self.facts = api, leases, facts
        self.key = str(facts.get("sessionKey") or "")

    def session(self) -> dict[str, str]:
        fields = {"agent_id": AGENT_ID, "session_key": self.key,
                  "session_id": str(self.facts.get("sessionId") or ""),
                  "model": str(self.facts.get("model") or "")}
        return {name: value for name, value in fields.items() if value}

    def goal(self) -> str | None:
        return self.leases.session_goal(self.key) if self.key and "/" not in self.key else None

    # ------------------------------------------------------------ before_prompt_build

    def before_prompt_build(self) -> dict[str, Any] | None:
        goal_id = self.goal()
        if goal_id:
            self._report_held(goal_id, this_run=False)
        if not owner_turn(self.facts):
            if goal_id and continuation(self.facts) and self.facts.get("trigger") == "user":
                return {"owner": False,
                        "context": note(goal_id, "This is a Wake Ledger continuation of it.")}
            return None  # cron, webhook, heartbeat, subagent turns: never admitted
        try:
            return self._owner_turn(goal_id)
        except CliError as error:
            return refused(error)

    def _owner_turn(self, goal_id: str | None) -> dict[str, Any] | None:
        if goal_id:
            try:
                state = self.api.call("GET", f"goals/{goal_id}")
            except ApiError as error:
                if error.code != "not_found":
                    raise
                state = {}  # a goal this server does not know: admit the turn anew
            if state.get("status") in ACTIVE:
                if self.leases.get(goal_id) is None:
                    continued = self._continued(goal_id)
                    if continued is not None:
                        return continued
                return {"owner": True, "context": note(goal_id, self._take_lease(goal_id))}
        return self._admit()

    def _continued(self, goal_id: str) -> dict[str, Any] | None:
        """A run starting in the goal's session is the host continuing it: the
        server decides whether that is the reset's one continuation
        (``host_continued``: this run holds the lease), one a wake already
        made (``stood_down``: the person is told, the run records nothing),
        or no continuation at all (``not_a_reset``: go on as before)."""
        try:
            answer = self.api.call("POST", f"goals/{goal_id}/continuations", {
                "host": "openclaw", "trigger": "run_start", "session_key": self.key})
        except ApiError as error:
            if error.code in ("not_found", "method_not_allowed"):
                return None  # a server without host continuations: as before
            raise
        outcome = answer.get("outcome")
        if outcome == "host_continued":
            lease_note = self._keep(goal_id, answer)
            return {"owner": True, "context": note(
                goal_id, f"{lease_note} This run is the goal's continuation after its reset.")}
        if outcome == "stood_down":
            why = " ".join(str(answer.get("notes") or "").split())[:300]
            line = (f"Wake Ledger: goal {goal_id} was already continued after its reset; "
                    f"this turn records nothing for it. {why}").strip()
            log(f"stood down: goal {goal_id}")
            return {"owner": False, "notice": line,
                    "context": f"{line} Tell the person so in one line; do no work on the goal."}
        return None

    def _admit(self) -> dict[str, Any] | None:
        session_id = str(self.facts.get("sessionId") or self.facts.get("runId") or "")
        workspace = str(self.facts.get("workspace") or os.environ.get("WAKELEDGER_WORKSPACE")
                        or os.getcwd())
        body: dict[str, Any] = {
            "goal_key": f"openclaw-{session_id}",
            "workspace": workspace,
            # A secret-free summary, never the owner's raw prompt.
            "objective": os.environ.get("WAKELEDGER_OBJECTIVE")
            or f"OpenClaw session {self.key}",
            "done_criteria": [line.strip() for line in
                              os.environ.get("WAKELEDGER_DONE", "").splitlines() if line.strip()],
            # Every session of an OpenClaw agent shares the agent's workspace:
            # each is its own goal, held by its session key (policy.BINDS).
            "session": {**self.session(), "binds": "session"},
        }
        if os.environ.get("WAKELEDGER_DISPATCH"):
            body["policy"] = {"dispatch": os.environ["WAKELEDGER_DISPATCH"]}
        answer = self.api.call("POST", "goals", body)
        goal_id = answer["goal"]["id"]
        self.leases.bind_session(self.key, goal_id)
        return {"owner": True, "context": note(goal_id, self._keep(goal_id, answer))}

    def _take_lease(self, goal_id: str) -> str:
        if self.leases.get(goal_id) is not None:
            return "This session holds the goal's lease."
        return self._keep(goal_id, self.api.call("POST", f"goals/{goal_id}/lease", {}))

    def _keep(self, goal_id: str, answer: dict[str, Any]) -> str:
        if answer.get("acquired"):
            self.leases.save(goal_id, answer["lease"])
            return "This session holds the goal's lease."
        return (f"This session holds no lease ({answer.get('next_required_action')}): "
                "the goal waits for its wake; record nothing for it in this turn.")

    # ------------------------------------------------------------ agent_end

    def agent_end(self) -> None:
        """One attempt of a run ended. OpenClaw retries a generic 429 inside
        the run, and every attempt fires agent_end with the same runId: a
        failed attempt is held (its class and reset only), not reported, so a
        later attempt that ends cleanly reports the run as the clean end it
        was and the goal never pauses for a backoff it does not need. The
        held failure is reported when the run has really ended: the plugin's
        ``run_settled`` (no other attempt within its settle time), or the
        session's next run."""
        goal_id = self.goal()
        if goal_id is None:
            return
        with self.leases.locked(goal_id):
            lease = self.leases.get(goal_id)
            if attempt_failed(self.facts):
                self._hold_failure(goal_id)
                return
            recovered = self._take_held(goal_id)
            if lease is not None:
                self._fenced(goal_id, "runs", {"outcome": "ok", "session": self.session()}, lease)
                self._fenced(goal_id, "lease/release", {}, lease)
                self.leases.forget(goal_id)
                if recovered:
                    log(f"agent_end: goal {goal_id}: the run recovered from its failed "
                        "attempt; reported as a clean end")
            elif self.facts.get("owner") is True:
                state = self.api.call("GET", f"goals/{goal_id}")
                if state.get("status") in ("paused", "waiting"):
                    self._activity(goal_id)

    def run_settled(self) -> None:
        """The plugin saw no other attempt of the run within its settle time:
        the held failure was the run's end. Report it."""
        goal_id = self.goal()
        if goal_id is not None:
            self._report_held(goal_id, this_run=True)

    def _report_held(self, goal_id: str, *, this_run: bool) -> None:
        """Report the failure held for the goal if it is this run's
        (``run_settled``) or, at a new run's start, an earlier run's: its
        settle never came (the Gateway restarted), so it was that run's end."""
        with self.leases.locked(goal_id):
            held = self._held(goal_id)
            run_id = str(self.facts.get("runId") or "")
            if held is None or (held.get("run_id") == run_id) != this_run:
                return
            self._take_held(goal_id)
            self._report_failure(goal_id, held["body"])

    def _hold_failure(self, goal_id: str) -> None:
        # The text is read here and dropped: only the class and reset are kept.
        text = "\n".join(str(self.facts.get(k) or "")
                         for k in ("errorMessage", "errorCode", "errorType"))
        body = runend.run_report(None, text, now=datetime.now(UTC),
                                 tz=os.environ.get("TZ") or "UTC")
        run_id = str(self.facts.get("runId") or "")
        write_private(self._held_path(goal_id), json.dumps({"run_id": run_id, "body": body}))
        said = (" by its model call's outcome" if self.facts.get("callOutcome") == "error"
                else " by its last message")
        log(f"agent_end: goal {goal_id}: an attempt of run {run_id} failed{said} "
            f"({body['error_text']}); held until the run ends")

    def _held_path(self, goal_id: str) -> Path:
        return self.leases.root / "openclaw-held" / f"{goal_id}.json"

    def _held(self, goal_id: str) -> dict[str, Any] | None:
        try:
            held = json.loads(self._held_path(goal_id).read_text())
        except (OSError, ValueError):
            return None
        return held if isinstance(held, dict) and isinstance(held.get("body"), dict) else None

    def _take_held(self, goal_id: str) -> bool:
        try:
            self._held_path(goal_id).unlink()
        except FileNotFoundError:
            return False
        return True

    def _report_failure(self, goal_id: str, body: dict[str, Any]) -> None:
        lease = self.leases.get(goal_id)
        if lease is None:
            answer = self.api.call("POST", f"goals/{goal_id}/lease", {})
            if not answer.get("acquired"):
                log(f"run end: goal {goal_id}: no lease to report the run with "
                    f"({answer.get('next_required_action')})")
                return
            lease = {"token": answer["lease"]["token"],
                     "generation": answer["lease"]["generation"]}
        answer = self._fenced(goal_id, "runs", {**body, "session": self.session()}, lease)
        self.leases.forget(goal_id)  # a reported failure ends the lease
        log(f"run end: goal {goal_id} {answer.get('status')} ({answer.get('classification')}"
            + (f", until {answer['paused_until']})" if answer.get("paused_until") else ")"))

    def _activity(self, goal_id: str) -> None:
        """An owner's turn finished while the goal held no lease for this
        session: a human went on by hand (SESSION_ACTIVITY, for a human to
        look at before any wake continues it)."""
        answer = self.api.call("POST", f"goals/{goal_id}/session-activity",
                               {"session": self.session()})
        log(f"agent_end: goal {goal_id}: a turn finished by hand → {answer.get('status')}"
            f" ({answer.get('reason')})")

    def _fenced(self, goal_id: str, path: str, body: dict[str, Any],
                lease: dict[str, Any]) -> dict[str, Any]:
        return hookrun.fenced(self.api, self.leases, goal_id, path, body, lease, LEASE_ENDING)


def refused(error: CliError) -> dict[str, Any]:
    """An owner's turn the server would not track (a refusal, no server, a
    bad token): the turn goes on, and the person and the model are told in
    one line, never only in the Gateway's log. The line is the problem's own
    message (no token, no provider text: the API never echoes either)."""
    code = (error.code or "unreachable") if isinstance(error, ApiError) else "not_set_up"
    reason = " ".join(str(error).split())[:300]
    line = f"Wake Ledger is not tracking this chat ({code}): {reason}"
    log(f"not tracked: {reason}")
    return {"owner": False, "notice": line,
            "context": f"{line}. Tell the person so in one line; record nothing for it."}


def note(goal_id: str, lease_note: str) -> str:
    """The short context the model reads: its goal, and how to record work."""
    return "\n".join([
        f"Wake Ledger goal {goal_id} is bound to this session. {lease_note}",
        f"Record each verified step with the MCP tool wakeledger__checkpoint_goal "
        f"(goal_id {goal_id}); finish with wakeledger__finish_goal and one evidence item per "
        "done criterion. A usage limit is reported for you: a wake continues this session "
        "after the reset. Never cross an approval gate (request_approval and wait).",
    ])


def log(message: str) -> None:
    print(f"wakeledger hook openclaw: {message}", file=sys.stderr, flush=True)


HANDLERS = {"before_prompt_build": Hook.before_prompt_build, "agent_end": Hook.agent_end,
            "run_settled": Hook.run_settled}


def main(source: TextIO | None = None) -> int:
    text = (source or sys.stdin).read()
    try:
        hookrun.hook_client()
    except CliError as error:
        # No client at all (no token, no URL): an owner's turn is told so in
        # the chat too, like any refusal; every other hook logs it as before.
        try:
            facts = json.loads(text)
        except ValueError:
            facts = None
        if (isinstance(facts, dict) and facts.get("hook") == "before_prompt_build"
                and owner_turn(facts)):
            print(json.dumps(refused(error)))
            return 0
    return hookrun.run_hook(io.StringIO(text), what="one hook's facts", name_field="hook",
                            hook=lambda api, facts: Hook(api, FileLeases(), facts),
                            handlers=HANDLERS, log=log, goes_on="the turn")
