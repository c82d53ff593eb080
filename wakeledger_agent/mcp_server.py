"""``wakeledger mcp``: the agent calls as MCP tools, served over stdio.

A client of the REST API, like the ``wakeledger`` CLI (``WAKELEDGER_URL``,
``WAKELEDGER_TOKEN``), never an in-process shortcut: each tool is one API call
(``resume_goal`` is two), its description and input schema are the API's own,
read from the server's OpenAPI document at start-up (``mcp_tools``), and its
result is the API's JSON. An API problem becomes a tool error whose text and
structured content keep the problem's ``code``.

The lease token stays out of the agent's context: ``run_goal``,
``resume_goal`` and a granted ``claim_scheduled_continuation`` keep it, the
fenced tools add it, and no answer shows it. By default it is kept in this
process only; ``--share-leases`` keeps it in the CLI's lease files instead, so
the lease a ``wakeledger hook`` took at session start is the one the tools
use. The server's instructions are the skill document the API serves, with
the tools named in place of the CLI's commands.

Built on the SDK's low-level ``Server`` rather than ``MCPServer``: the schemas
come from the API's OpenAPI document, not from Python signatures, and the API
(not the SDK) validates the arguments, so a bad value gets the same
``validation_error`` it gets over REST.
"""

import json
import logging
import sys
import urllib.parse
import uuid
from collections.abc import Mapping
from importlib import metadata
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from wakeledger_agent import client
from wakeledger_agent.client import ApiError, Client
from wakeledger_agent.errors import EXIT_AUTH, EXIT_NETWORK, EXIT_USAGE, CliError
from wakeledger_agent.leases import FileLeases, MemoryLeases
from wakeledger_agent.mcp_tools import (
    PATH_PARAMS,
    RESUME_PATH,
    SPECS,
    WAKE_FIELDS,
    Spec,
    build_tools,
    json_schema,
)

__all__ = ["REDACTED", "SPECS", "Tools", "json_schema", "main"]

logger = logging.getLogger("wakeledger.mcp")

REDACTED = "(kept by the wakeledger MCP server)"
LeaseStore = MemoryLeases | FileLeases

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
`get_scheduled_continuation` (the goal's one recurring wake),
`record_watchdog_receipt` (what your host did with it), and
`claim_scheduled_continuation`, the first call of any turn your host's
schedule fires: work only when its `outcome` is `recurring_acquired`.

This server keeps your lease token and adds it to every fenced call: never ask
for it, never pass a `lease` argument. A tool error starts with the problem
`code`; on `lease_lost` or `goal_terminal` stop working on that goal at once.

"""


def problem(code: str, detail: str, **extra: Any) -> ApiError:
    """A problem this server finds itself, shaped like the API's."""
    return ApiError(EXIT_USAGE, detail, None, {"code": code, "detail": detail, **extra})


# ---------------------------------------------------------------- leases and results


def goal_key(goal_id: str) -> str:
    try:
        return str(uuid.UUID(goal_id))
    except ValueError:
        return goal_id  # the API answers not_found


def redacted(answer: Any) -> Any:
    """The answer with any lease token replaced: the token stays in this process."""
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


class Tools:
    """The tools' behaviour: one API call each, and the leases they hold."""

    # A lease that cannot work again: forget it.
    LEASE_ENDING_CODES = ("lease_lost", "goal_terminal")
    TAKES_A_LEASE = ("run_goal", "resume_goal", "claim_scheduled_continuation")

    def __init__(self, api: Client, tools: list[types.Tool], leases: LeaseStore | None = None):
        self.api = api
        self.tools = tools
        self.leases = MemoryLeases() if leases is None else leases

    async def list_tools(self, ctx: ServerRequestContext,
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools)

    async def call_tool(self, ctx: ServerRequestContext,
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        spec = SPECS.get(params.name)
        if spec is None:
            return failed(problem("not_found", f"no tool named {params.name!r}"))
        args = dict(params.arguments or {})
        goal = goal_key(str(args.get("goal_id", "")))
        try:
            return await self.dispatch(params.name, spec, args)
        except ApiError as error:
            hint = ""
            if error.code in self.LEASE_ENDING_CODES:
                self.leases.forget(goal)
                hint = "Stop working on this goal now; get_goal shows where it stands."
            elif error.code == "lease_required":
                hint = (f"This server holds no lease for goal {goal}: call resume_goal (or "
                        "claim_scheduled_continuation in a host-fired turn) first.")
            return failed(error, hint)

    async def dispatch(self, name: str, spec: Spec, args: dict[str, Any]) -> types.CallToolResult:
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
        answer = await self.request(spec.method, path, body)

        if name == "run_goal":
            goal = goal_key(answer["goal"]["id"])
        if name == "resume_goal":
            packet = await self.request("GET", RESUME_PATH.format(**path_args))
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

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return await anyio.to_thread.run_sync(lambda: self.api.call(method, path, body))


# ---------------------------------------------------------------- start-up


def load(api: Client) -> tuple[list[types.Tool], str]:
    """The tools (from the API's OpenAPI document) and the instructions (its skill
    document), both from the server this process talks to."""
    openapi = api.call("GET", "schema?format=json", auth=False)
    skill = api.call("GET", "skill.md", auth=False, raw=True)
    # The token is checked now, so a wrong one fails here, where the host's
    # log shows it, instead of on the agent's first call.
    api.call("GET", "goals?page_size=1")
    return build_tools(openapi), PREFACE.format(base=api.base) + skill


def build_server(api: Client, leases: LeaseStore | None = None) -> Server:
    tools, instructions = load(api)
    handler = Tools(api, tools, leases)
    try:
        version = metadata.version("wakeledger")
    except metadata.PackageNotFoundError:
        version = ""
    return Server("wakeledger", version=version, title="Wake Ledger",
                  instructions=instructions,
                  on_list_tools=handler.list_tools, on_call_tool=handler.call_tool)


async def serve(server: Server) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(environ: Mapping[str, str] | None = None, *, share_leases: bool = False) -> int:
    # stdout is the protocol: every word of ours goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="wakeledger mcp: %(message)s")
    try:
        api = client.from_env(environ, missing_token=EXIT_USAGE)
    except CliError as error:
        logger.error("%s", error)
        return error.exit_code
    try:
        server = build_server(api, FileLeases() if share_leases else None)
    except ApiError as error:
        logger.error("%s: %s", error.code or "error", error.problem.get("detail", ""))
        return EXIT_AUTH if error.code in ("unauthenticated", "forbidden") else EXIT_NETWORK
    except (LookupError, ValueError, TypeError) as error:
        logger.error("%s does not serve the Wake Ledger API this version expects: %s",
                     api.base, error)
        return EXIT_NETWORK
    logger.info("serving %d tools for %s", len(SPECS), api.base)
    anyio.run(serve, server)
    return 0
