"""``wakeledger mcp``: the agent calls as MCP tools, served over stdio.

A client of the REST API, like the ``wakeledger`` CLI (``WAKELEDGER_URL``,
``WAKELEDGER_TOKEN``), never an in-process shortcut: each tool is one API call
(``resume_goal`` is two), its description and input schema are the API's own,
read from the server's OpenAPI document at start-up, and its result is the
API's JSON. An API problem becomes a tool error whose text and structured
content keep the problem's ``code``.

The lease token stays in this process: ``run_goal``, ``resume_goal`` and a
granted ``claim_scheduled_continuation`` keep it, the fenced tools add it, and
no answer shows it, so the agent never copies a secret into its context. The
server's instructions are the skill document the API serves, with the tools
named in place of the CLI's commands.

Built on the SDK's low-level ``Server`` rather than ``MCPServer``: the schemas
come from the API's OpenAPI document, not from Python signatures, and the API
(not the SDK) validates the arguments, so a bad value gets the same
``validation_error`` it gets over REST.
"""

import json
import logging
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

logger = logging.getLogger("wakeledger.mcp")

REDACTED = "(kept by the wakeledger MCP server)"
CHOICE_LIST = re.compile(r"(\n\n)?(\* `[^`]*` - [^\n]*\n?)+$")
# Exit codes at start-up, the CLI's where they mean the same.
EXIT_USAGE, EXIT_AUTH, EXIT_NETWORK = 2, 4, 9


@dataclass(frozen=True)
class Spec:
    """One tool: the API call it makes and what it adds to the API's words."""

    method: str
    path: str  # relative to the API's base, e.g. "goals/{goal_id}/runs"
    fenced: bool = False  # this server adds the lease it holds
    read_only: bool = False
    note: str = ""


SPECS: dict[str, Spec] = {
    "run_goal": Spec(
        "POST", "goals",
        note="This server keeps the lease token for the goal's later calls; the answer "
             "never shows it."),
    "checkpoint_goal": Spec(
        "POST", "goals/{goal_id}/checkpoints", fenced=True,
        note="Set release_lease on the last checkpoint before your turn ends."),
    "heartbeat": Spec("POST", "goals/{goal_id}/lease/heartbeat", fenced=True,
                      note="Call it at least every lease_seconds / 2 while you work."),
    "report_run": Spec(
        "POST", "goals/{goal_id}/runs", fenced=True,
        note="A rate limit releases the lease: stop working, a wake resumes the goal."),
    "request_approval": Spec("POST", "goals/{goal_id}/approvals", fenced=True),
    "track_job": Spec("POST", "goals/{goal_id}/jobs", fenced=True),
    "update_job": Spec("POST", "goals/{goal_id}/jobs/{job_id}/status", fenced=True),
    "prepare_scheduled_continuation": Spec(
        "POST", "goals/{goal_id}/watchdog", fenced=True,
        note="With policy.scheduler host, create the answer's host_schedule in your host, "
             "then call record_watchdog_receipt."),
    "claim_scheduled_continuation": Spec(
        "POST", "goals/{goal_id}/claim",
        note="Call it first in a host-fired turn and work only when the outcome is "
             "recurring_acquired; this server then keeps the new lease."),
    "cancel_scheduled_continuation": Spec("DELETE", "goals/{goal_id}/watchdog", fenced=True),
    "record_watchdog_receipt": Spec("POST", "goals/{goal_id}/watchdog/receipts", fenced=True),
    "finish_goal": Spec("POST", "goals/{goal_id}/finish", fenced=True),
    "get_goal": Spec("GET", "goals/{goal_id}", read_only=True),
    "get_scheduled_continuation": Spec(
        "GET", "goals/{goal_id}", read_only=True,
        note="Answers the goal's watchdog (its one recurring wake, with its health), the "
             "one-off wake at a rate limit's reset, the last wake and the pause, taken from "
             "that state."),
    "resume_goal": Spec(
        "POST", "goals/{goal_id}/lease",
        note="Then reads the resume packet: verify its artifacts_to_verify before you go "
             "on. This server keeps the lease token."),
}
RESUME_PATH = "goals/{goal_id}/resume"
# What get_scheduled_continuation keeps of the goal's state.
WAKE_FIELDS = ("id", "status", "reason", "paused_until", "watchdog", "reset_wake", "last_wake",
               "continuations_used", "retry_count", "policy")
PATH_PARAMS = {
    "goal_id": "The goal's id: goal.id in run_goal's answer.",
    "job_id": "The job's id: job.job_id in track_job's answer.",
}

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


class ApiProblem(Exception):
    """An RFC 9457 problem from the API, or one shaped like it for a network error."""

    def __init__(self, problem: dict[str, Any]):
        super().__init__(problem.get("detail", ""))
        self.problem = problem

    @property
    def code(self) -> str:
        return str(self.problem.get("code", ""))


def problem(code: str, detail: str, **extra: Any) -> ApiProblem:
    return ApiProblem({"code": code, "detail": detail, **extra})


# ---------------------------------------------------------------- HTTP


def base_url(raw: str) -> str:
    """The API's base; ``http://host:8000`` and ``…/api/v1/`` both mean ``…/api/v1``."""
    base = raw.strip().rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise ValueError("set WAKELEDGER_URL to the API's http(s) URL "
                         "(e.g. http://127.0.0.1:8000/api/v1)")
    return base if base.endswith("/api/v1") else f"{base}/api/v1"


class Api:
    """Blocking calls to the REST API (run in a worker thread by the tools)."""

    def __init__(self, base: str, token: str, timeout: float):
        self.base, self.token, self.timeout = base, token, timeout

    def call(self, method: str, path: str, body: dict[str, Any] | None = None, *,
             auth: bool = True, raw: bool = False) -> Any:
        headers = {"Accept": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if method in ("POST", "DELETE"):
            data = json.dumps(body or {}).encode()
            headers["Content-Type"] = "application/json"
        if method == "POST":
            # One key per tool call: the retry below replays the first answer
            # instead of acting twice.
            headers["Idempotency-Key"] = str(uuid.uuid4())
        last: Exception | None = None
        for _attempt in range(2):
            # base_url() admitted only http(s): never file: or ftp:.
            request = urllib.request.Request(f"{self.base}/{path}", data=data,  # noqa: S310
                                             headers=headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # noqa: S310
                    content = answer.read()
                    return content.decode() if raw else json.loads(content or b"null")
            except urllib.error.HTTPError as error:
                raise _problem_of(error) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                last = error
        raise problem("unreachable", f"cannot reach {self.base}: {last}")


def _problem_of(error: urllib.error.HTTPError) -> ApiProblem:
    try:
        body = json.loads(error.read() or b"null")
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("code"):
        return ApiProblem(body)
    code = "server_error" if error.code >= 500 else "http_error"
    return problem(code, f"HTTP {error.code} {error.reason} from {error.url}",
                   status=error.code)


# ---------------------------------------------------------------- schemas


def json_schema(node: Any, components: dict[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """An OpenAPI 3.0 schema as self-contained JSON Schema 2020-12 (MCP's dialect):
    references inlined, ``nullable`` as a ``null`` type, strict objects closed."""
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in seen:
            raise ValueError(f"recursive schema {name}")
        # A component's description is its serializer's docstring, not the
        # field's help text (which sits beside the reference).
        target = {k: v for k, v in components[name].items() if k != "description"}
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return json_schema({**target, **rest}, components, (*seen, name))
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("nullable", "readOnly", "writeOnly"):
            continue
        if key == "properties":
            out[key] = {name: json_schema(v, components, seen) for name, v in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = json_schema(value, components, seen)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [json_schema(v, components, seen) for v in value]
        else:
            out[key] = value
    if len(out.get("allOf", ())) == 1:  # drf-spectacular's wrapper for a described $ref
        out = {**out.pop("allOf")[0], **out}
    if "enum" in out and isinstance(out.get("description"), str):
        # drf-spectacular appends "* `a` - a" per choice: the enum says it already.
        out["description"] = CHOICE_LIST.sub("", out["description"])
        if not out["description"]:
            del out["description"]
    if node.get("nullable"):
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        elif "type" not in out:
            out = {"anyOf": [out, {"type": "null"}]}
    if out.get("type") == "object" and "properties" in out:
        # Every request serializer is strict: an unknown field is a 400.
        out.setdefault("additionalProperties", False)
    return out


def find_operation(openapi: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    suffix = "/" + path
    for key, operations in openapi.get("paths", {}).items():
        if key.endswith(suffix) and method.lower() in operations:
            return operations[method.lower()]
    raise LookupError(f"the API's OpenAPI document has no {method} {path}")


def describe(operation: dict[str, Any], note: str = "") -> str:
    parts = [operation.get("summary", "").rstrip(".") + ".", operation.get("description", ""),
             note]
    return " ".join(part.strip() for part in parts if part.strip())


def input_schema(spec: Spec, operation: dict[str, Any],
                 components: dict[str, Any]) -> dict[str, Any]:
    body = (operation.get("requestBody", {}).get("content", {})
            .get("application/json", {}).get("schema"))
    schema = json_schema(body, components) if body else {"type": "object", "properties": {}}
    properties = dict(schema.get("properties", {}))
    required = [name for name in schema.get("required", []) if name != "lease"]
    properties.pop("lease", None)  # this server adds it
    described = {p["name"]: p.get("description", "") for p in operation.get("parameters", [])
                 if p.get("in") == "path"}
    params = [name for name in PATH_PARAMS if "{" + name + "}" in spec.path]
    for name in reversed(params):
        properties = {name: {"type": "string", "minLength": 1,
                             "description": described.get(name) or PATH_PARAMS[name]},
                      **properties}
        required.insert(0, name)
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


def build_tools(openapi: dict[str, Any]) -> list[types.Tool]:
    components = openapi.get("components", {}).get("schemas", {})
    tools = []
    for name, spec in SPECS.items():
        operation = find_operation(openapi, spec.method, spec.path)
        description = describe(operation, spec.note)
        if name == "resume_goal":
            resume = find_operation(openapi, "GET", RESUME_PATH)
            description = f"{description} Resume packet: {describe(resume)}"
        tools.append(types.Tool(
            name=name, description=description,
            input_schema=input_schema(spec, operation, components),
            annotations=types.ToolAnnotations(
                read_only_hint=spec.read_only, destructive_hint=False,
                idempotent_hint=spec.read_only or spec.method == "DELETE",
                open_world_hint=False)))
    return tools


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


def failed(error: ApiProblem, hint: str = "") -> types.CallToolResult:
    body = error.problem
    status = f" ({body['status']})" if body.get("status") else ""
    text = f"{error.code}{status}: {body.get('detail', '')}"
    if hint:
        text += f"\n{hint}"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{text}\n{json.dumps(body)}")],
        structured_content=body, is_error=True)


class Tools:
    """The tools' behaviour: one API call each, and the leases they hold."""

    # A lease that cannot work again: forget it.
    LEASE_ENDING_CODES = ("lease_lost", "goal_terminal")

    def __init__(self, api: Api, tools: list[types.Tool]):
        self.api = api
        self.tools = tools
        self.leases: dict[str, dict[str, Any]] = {}  # goal id -> {token, generation}

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
        except ApiProblem as error:
            hint = ""
            if error.code in self.LEASE_ENDING_CODES:
                self.leases.pop(goal, None)
                hint = "Stop working on this goal now; get_goal shows where it stands."
            elif error.code == "lease_required":
                hint = (f"This server holds no lease for goal {goal}: call resume_goal (or "
                        "claim_scheduled_continuation in a host-fired turn) first.")
            return failed(error, hint)

    async def dispatch(self, name: str, spec: Spec, args: dict[str, Any]) -> types.CallToolResult:
        if "lease" in args:
            raise problem("validation_error", "Do not pass a lease: this server keeps it and "
                          "adds it.", status=400, errors={"lease": ["Unknown field."]})
        given = {}
        for param in PATH_PARAMS:
            if "{" + param + "}" not in spec.path:
                continue
            value = args.pop(param, None)
            if not isinstance(value, str) or not value:
                raise problem("validation_error", f"{param} is required.", status=400,
                              errors={param: ["This field is required."]})
            given[param] = value
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
        notes: list[str] = []

        if name == "run_goal":
            goal = goal_key(answer["goal"]["id"])
        if name == "resume_goal":
            packet = await self.request("GET", RESUME_PATH.format(**path_args))
            answer = {**answer, "resume_packet": packet}
        if name == "get_scheduled_continuation":
            answer = {key: answer.get(key) for key in WAKE_FIELDS}

        lease = answer.get("lease") if isinstance(answer, dict) else None
        if name in ("run_goal", "resume_goal", "claim_scheduled_continuation"):
            if isinstance(lease, dict) and lease.get("token"):
                self.leases[goal] = {"token": lease["token"], "generation": lease["generation"]}
            elif goal in self.leases:
                notes.append(f"This server still holds generation "
                             f"{self.leases[goal]['generation']} of this goal's lease: go on "
                             "with the fenced tools.")
        elif spec.fenced and goal in self.leases:
            status = goal_status(answer)
            released = name == "checkpoint_goal" and args.get("release_lease") is True
            if released or (status is not None and status != "running"):
                self.leases.pop(goal, None)
        return ok(redacted(answer), *notes)

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return await anyio.to_thread.run_sync(lambda: self.api.call(method, path, body))


# ---------------------------------------------------------------- start-up


def load(api: Api) -> tuple[list[types.Tool], str]:
    """The tools (from the API's OpenAPI document) and the instructions (its skill
    document), both from the server this process talks to."""
    openapi = api.call("GET", "schema?format=json", auth=False)
    skill = api.call("GET", "skill.md", auth=False, raw=True)
    # The token is checked now, so a wrong one fails here, where the host's
    # log shows it, instead of on the agent's first call.
    api.call("GET", "goals?page_size=1")
    return build_tools(openapi), PREFACE.format(base=api.base) + skill


def build_server(api: Api) -> Server:
    tools, instructions = load(api)
    handler = Tools(api, tools)
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


def main(environ: dict[str, str] | None = None) -> int:
    env = os.environ if environ is None else environ
    # stdout is the protocol: every word of ours goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="wakeledger mcp: %(message)s")
    token = env.get("WAKELEDGER_TOKEN", "")
    try:
        base = base_url(env.get("WAKELEDGER_URL", ""))
    except ValueError as error:
        logger.error("%s", error)
        return EXIT_USAGE
    if not token:
        logger.error("set WAKELEDGER_TOKEN to your API token")
        return EXIT_USAGE
    try:
        timeout = float(env.get("WAKELEDGER_TIMEOUT") or 30)
    except ValueError:
        timeout = 0
    if not 0 < timeout <= 600:
        logger.error("WAKELEDGER_TIMEOUT must be a number of seconds (0 < t <= 600)")
        return EXIT_USAGE
    api = Api(base, token, timeout)
    try:
        server = build_server(api)
    except ApiProblem as error:
        logger.error("%s: %s", error.code or "error", error)
        return EXIT_AUTH if error.code in ("unauthenticated", "forbidden") else EXIT_NETWORK
    except (LookupError, ValueError, TypeError) as error:
        logger.error("%s does not serve the Wake Ledger API this version expects: %s",
                     base, error)
        return EXIT_NETWORK
    logger.info("serving %d tools for %s", len(SPECS), base)
    anyio.run(serve, server)
    return 0
