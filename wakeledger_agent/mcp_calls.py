"""What each MCP tool does, for both transports: ``wakeledger mcp`` (stdio, a
client of the REST API over HTTP) and the product's ``/mcp`` (streamable
HTTP, the same API views called in-process, ``api/mcp/``).

Synchronous and transport-free: a ``ToolCalls`` is given the one function
that makes an API call (``request(method, path, body)``, raising ``ApiError``
with the API's problem) and a lease store (``get``/``save``/``forget`` by
goal id). So the tools' arguments, the lease they add, the answers they
redact and the structured errors they return are written once.
"""

import json
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any, Protocol

import mcp.types as types

from wakeledger_agent.client import ApiError
from wakeledger_agent.errors import EXIT_USAGE
from wakeledger_agent.mcp_tools import PATH_PARAMS, RESUME_PATH, SPECS, WAKE_FIELDS, Spec

REDACTED = "(kept by the wakeledger MCP server)"

Request = Callable[[str, str, "dict[str, Any] | None"], Any]


class LeaseStore(Protocol):
    def get(self, goal_id: str) -> dict[str, Any] | None: ...
    def save(self, goal_id: str, lease: dict[str, Any]) -> None: ...
    def forget(self, goal_id: str) -> None: ...


def problem(code: str, detail: str, **extra: Any) -> ApiError:
    """A problem the MCP layer finds itself, shaped like the API's."""
    return ApiError(EXIT_USAGE, detail, None, {"code": code, "detail": detail, **extra})


def goal_key(goal_id: str) -> str:
    try:
        return str(uuid.UUID(goal_id))
    except ValueError:
        return goal_id  # the API answers not_found


def redacted(answer: Any) -> Any:
    """The answer with any lease token replaced: the token stays with the server."""
    lease = answer.get("lease") if isinstance(answer, dict) else None
    if isinstance(lease, dict) and "token" in lease:
        return {**answer, "lease": {**lease, "token": REDACTED}}
    return answer


def goal_status(answer: Any) -> str | None:
    """The goal's status as an answer tells it, wherever the answer puts it."""
    if not isinstance(answer, dict):
        return None
    for nested in ("goal", "report", "checkpoint"):
        if isinstance(answer.get(nested), dict) and "status" in answer[nested]:
            return answer[nested]["status"]
    if answer.get("completion_state") in ("completed", "failed", "blocked"):
        return str(answer["completion_state"])
    status = answer.get("status")
    return status if isinstance(status, str) else None


def ok(answer: Any, *notes: str) -> types.CallToolResult:
    content = [types.TextContent(type="text", text=json.dumps(answer))]
    content += [types.TextContent(type="text", text=note) for note in notes]
    structured = answer if isinstance(answer, dict) else {"result": answer}
    return types.CallToolResult(content=content, structured_content=structured)


def failed(error: ApiError, hint: str = "") -> types.CallToolResult:
    body = error.problem
    status = f" ({body['status']})" if body.get("status") else ""
    text = f"{error.code}{status}: {body.get('detail', '')}"
    if hint:
        text += f"\n{hint}"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{text}\n{json.dumps(body)}")],
        structured_content=body, is_error=True)


def _path_args(spec: Spec, args: dict[str, Any]) -> dict[str, str]:
    """The path's parameters, taken out of the arguments (the rest is the body)."""
    given = {}
    for param in PATH_PARAMS:
        if "{" + param + "}" not in spec.path:
            continue
        value = args.pop(param, None)
        if not isinstance(value, str) or not value:
            raise problem("validation_error", f"{param} is required.", status=400,
                          errors={param: ["This field is required."]})
        given[param] = value
    return given


class ToolCalls:
    """The tools' behaviour: one API call each (``resume_goal`` two), and the
    leases they hold."""

    # A lease that cannot work again: forget it.
    LEASE_ENDING_CODES = ("lease_lost", "goal_terminal")
    TAKES_A_LEASE = ("run_goal", "resume_goal", "claim_scheduled_continuation")

    def __init__(self, request: Request, leases: LeaseStore):
        self.request = request
        self.leases = leases

    def call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        spec = SPECS.get(name)
        if spec is None:
            return failed(problem("not_found", f"no tool named {name!r}"))
        args = dict(arguments or {})
        goal = goal_key(str(args.get("goal_id", "")))
        try:
            return self.dispatch(name, spec, args)
        except ApiError as error:
            hint = ""
            if error.code in self.LEASE_ENDING_CODES:
                self.leases.forget(goal)
                hint = "Stop working on this goal now; get_goal shows where it stands."
            elif error.code == "database_busy":
                hint = ("The server's database was busy and nothing was recorded: call this "
                        "tool again with the same arguments after "
                        f"{error.problem.get('retry_after_seconds', 5)} s.")
            elif error.code == "lease_required":
                hint = (f"This server holds no lease for goal {goal}: call resume_goal (or "
                        "claim_scheduled_continuation in a host-fired turn) first.")
            return failed(error, hint)

    def dispatch(self, name: str, spec: Spec, args: dict[str, Any]) -> types.CallToolResult:
        if "lease" in args:
            raise problem("validation_error", "Do not pass a lease: this server keeps it and "
                          "adds it.", status=400, errors={"lease": ["Unknown field."]})
        given = _path_args(spec, args)
        goal = goal_key(given.get("goal_id", ""))
        path_args = {k: urllib.parse.quote(v, safe="") for k, v in given.items()}
        path = spec.path.format(**path_args)
        body = None
        if spec.method == "GET" and args:
            # The API never sees these: refuse them as it refuses unknown fields.
            raise problem("validation_error", "Some fields are not valid; see errors.",
                          status=400, errors={name: ["Unknown field."] for name in sorted(args)})
        if spec.method != "GET":
            body = dict(args)
            held = self.leases.get(goal)
            if spec.fenced and held:
                body["lease"] = held
        answer = self.request(spec.method, path, body)

        if name == "run_goal":
            goal = goal_key(answer["goal"]["id"])
        if name == "resume_goal":
            packet = self.request("GET", RESUME_PATH.format(**path_args), None)
            answer = {**answer, "resume_packet": packet}
        if name == "get_scheduled_continuation":
            answer = {key: answer.get(key) for key in WAKE_FIELDS}
        notes = self.keep_lease(name, spec, goal, args, answer)
        return ok(redacted(answer), *notes)

    def keep_lease(self, name: str, spec: Spec, goal: str, args: dict[str, Any],
                   answer: Any) -> list[str]:
        """Keep a granted lease; forget one the answer ended. Returns the notes
        the result adds for the agent."""
        lease = answer.get("lease") if isinstance(answer, dict) else None
        held = self.leases.get(goal)
        if name in self.TAKES_A_LEASE:
            if isinstance(lease, dict) and lease.get("token"):
                self.leases.save(goal, lease)
            elif held is not None:
                return [f"This server still holds generation {held['generation']} of this "
                        "goal's lease: go on with the fenced tools."]
        elif spec.fenced and held is not None:
            status = goal_status(answer)
            released = name == "checkpoint_goal" and args.get("release_lease") is True
            if released or (status is not None and status != "running"):
                self.leases.forget(goal)
        return []


PREFACE = """\
# Wake Ledger through MCP

You reach Wake Ledger ({base}) through this server's tools, not through the
`wakeledger` CLI or HTTP. The skill document below names CLI commands; use these tools:
`start` = `run_goal`, `checkpoint` = `checkpoint_goal` (`--release` =
`release_lease: true`), `heartbeat` = `heartbeat`, `lease` and `resume` =
`resume_goal`, `show` = `get_goal`, `finish` = `finish_goal`. Also:
`report_run` (how a run ended: a rate limit pauses the goal and a wake resumes
it), `request_approval`, `track_job` / `update_job` (blocking CI runs, deploys),
`prepare_scheduled_continuation` / `cancel_scheduled_continuation` /
`get_scheduled_continuation` (the goal's one recurring wake), `await_goal` (a
goal someone else works on: over /mcp, run as a task, it lasts until the goal ends),
`record_watchdog_receipt` (what your host did with it), and
`claim_scheduled_continuation`, the first call of any turn your host's
schedule fires: work only when its `outcome` is `recurring_acquired`.

This server keeps your lease token and adds it to every fenced call: never ask
for it, never pass a `lease` argument. A tool error starts with the problem
`code`; on `lease_lost` or `goal_terminal` stop working on that goal at once.

"""


def instructions(base: str, skill: str) -> str:
    """The server's instructions: the preface, then the skill document the API serves."""
    return PREFACE.format(base=base) + skill
