"""``/mcp``: MCP over streamable HTTP, stateless, in both eras of the
protocol (docs/agents.md, "Remote MCP"):

- the handshake era (2025-11-25, 2025-06-18, 2025-03-26): ``initialize``,
  then each request carries the ``MCP-Protocol-Version`` header;
- 2026-07-28: no ``initialize`` and no session; ``server/discover``, and every
  request carries its own ``_meta`` (protocol version, client capabilities)
  that the ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` headers
  must repeat.

One tool registry and one method table serve both; the era of a message is
read from its header (and its ``_meta``), exactly as the SDK's own server
routes it, and the SDK's validation ladder (``mcp.shared.inbound``), request
surfaces and result surfaces (``mcp_types.methods``) decide what is valid in
that era, so this file holds no copy of the protocol's rules.

Why a Django view and not the SDK's ASGI app: the product is served by
gunicorn's sync (WSGI) workers, and the SDK's streamable HTTP server is an
ASGI app holding sessions in one process's memory. The specification lets a
server answer every POST with one ``application/json`` response, issue no
``Mcp-Session-Id`` and offer no GET stream (405); then each request stands
alone, any web process can answer it, and the only state between calls —
the lease a caller holds on a goal — lives in the database (``McpLease``,
which derives the token again, never stores it). Tools that report progress
or ask the client things would need a stream; ours need neither.

Every request passes, in order: the Host check (ALLOWED_HOSTS), the Origin
check (DNS rebinding: a browser page's Origin must be this site's own or
listed; a listed one is answered with CORS headers, its preflight too), the
body size limit, the bearer credential (an API token or an OAuth access
token; the bad-token throttle counts failures per address), the
per-credential rate limit, the content type, the strict JSON reading (the
REST API's), and the envelope. A 401 carries ``WWW-Authenticate: Bearer
resource_metadata=…`` (RFC 9728), where an OAuth client starts discovery.
Hostile bodies are a 4xx with a stable JSON-RPC code, never a 500.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import mcp.types as types
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    InboundLadderRejection,
    classify_inbound_request,
    unsupported_protocol_version_rejection,
    validate_mcp_param_headers,
)
from mcp_types import PROTOCOL_VERSION_META_KEY, SERVER_INFO_META_KEY
from mcp_types import methods as surfaces
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from api.mcp import guard, tasks
from api.mcp.eras import modern
from api.mcp.inprocess import (
    DatabaseLeases,
    InProcessApi,
    Principal,
    server_instructions,
    tools,
)
from api.parsing import strict_loads
from api.problems import PROBLEM_CONTENT_TYPE, problem
from wakeledger_agent.mcp_calls import ToolCalls

logger = logging.getLogger("wakeledger.mcp")

# Revisions of the initialize handshake we answer; the newest is offered when
# the client asks for one we do not know.
VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
HANDSHAKE = VERSIONS
# The per-request-envelope revisions: the SDK's, so a new one is served only
# once the SDK that validates it is installed.
MODERN = tuple(reversed(MODERN_PROTOCOL_VERSIONS))
EVERY_ERA = (*MODERN, *HANDSHAKE)
# A 2025 request without the header: the 2025-06-18 specification says to
# assume this revision.
HEADERLESS = "2025-03-26"
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
# Deeper than any tool's arguments; far below the depth at which Python's own
# recursion (the JSON encoder, pydantic) would fail on the way out.
MAX_DEPTH = 64
# What a tools/list or server/discover answer may be cached for (2026-07-28
# asks for a hint): the tools change only with a deploy.
CACHE_MS = 60_000


# ---------------------------------------------------------------- answers

def refusal(code: str, detail: str, *, headers: dict[str, str] | None = None,
            **extra: Any) -> HttpResponse:
    body = problem(code, detail, **extra)
    response = JsonResponse(body, status=body["status"], content_type=PROBLEM_CONTENT_TYPE)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def rpc_error(ident: Any, code: int, message: str, status: int = 200,
              data: Any = None) -> HttpResponse:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return JsonResponse({"jsonrpc": "2.0", "id": ident, "error": error}, status=status)


def rpc_result(ident: Any, result: dict[str, Any]) -> HttpResponse:
    return JsonResponse({"jsonrpc": "2.0", "id": ident, "result": result})


def dumped(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def version() -> str:
    try:
        return metadata.version("wakeledger")
    except metadata.PackageNotFoundError:
        return ""


def server_info() -> types.Implementation:
    return types.Implementation(name="wakeledger", title="Wake Ledger", version=version())


def present(method: str, meta: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """A spec method's result as the era's schema has it (the SDK's surface:
    what that revision lacks is dropped, what it requires is checked)."""
    return surfaces.serialize_server_result(method, meta[PROTOCOL_VERSION_META_KEY], result)


# ---------------------------------------------------------------- the methods

def initialize(request: HttpRequest, principal: Principal, params: dict[str, Any],
               meta: dict[str, Any]) -> dict[str, Any]:
    asked = params.get("protocolVersion")
    return present("initialize", meta, dumped(types.InitializeResult(
        protocol_version=asked if asked in VERSIONS else VERSIONS[0],
        capabilities=types.ServerCapabilities(tools=types.ToolsCapability(list_changed=False),
                                              tasks=tasks.SERVER_CAPABILITY),
        server_info=server_info(), instructions=server_instructions(request))))


def discover(request: HttpRequest, principal: Principal, params: dict[str, Any],
             meta: dict[str, Any]) -> dict[str, Any]:
    # The modern revisions only, as the SDK's own server lists them: a
    # 2025 revision is reached by initialize, not by this envelope.
    return present("server/discover", meta, dumped(types.DiscoverResult(
        supported_versions=list(MODERN),
        # The tasks extension is how a 2026-07-28 host learns that a goal
        # can be followed as a task (Claude Code follows tasks only so).
        capabilities=types.ServerCapabilities(tools=types.ToolsCapability(list_changed=False),
                                              extensions={tasks.EXTENSION: {}}),
        instructions=server_instructions(request), ttl_ms=CACHE_MS, cache_scope="private")))


def ping(request: HttpRequest, principal: Principal, params: dict[str, Any],
         meta: dict[str, Any]) -> dict[str, Any]:
    return {}


def list_tools(request: HttpRequest, principal: Principal, params: dict[str, Any],
               meta: dict[str, Any]) -> dict[str, Any]:
    result = dumped(types.ListToolsResult(tools=[tasks.advertised(t) for t in tools(request)]))
    if modern(meta):
        result.update(ttlMs=CACHE_MS, cacheScope="private")
    return present("tools/list", meta, result)


def call_tool(request: HttpRequest, principal: Principal, params: dict[str, Any],
              meta: dict[str, Any]) -> dict[str, Any]:
    name, arguments = params.get("name"), params.get("arguments") or {}
    if not isinstance(name, str) or not isinstance(arguments, dict):
        raise MCPError(INVALID_PARAMS, "tools/call needs a name and an arguments object.")
    if tasks.wants_task(name, params, meta):
        # Not through present(): the tools/call surface knows no task result.
        return tasks.create(request, principal, name, arguments, params, meta)
    api = InProcessApi(request, principal)
    result = ToolCalls(api, DatabaseLeases(principal, api)).call(name, arguments)
    return present("tools/call", meta, dumped(result))


Handler = Callable[[HttpRequest, Principal, dict[str, Any], dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Method:
    """One row of the method table: its handler and the revisions that have
    the method (asked in another, it is not found, as in the SDK)."""

    handler: Handler
    eras: tuple[str, ...] = EVERY_ERA


# The method table (method name -> handler). A handler gets the request, the
# caller, the params without ``_meta``, and ``_meta`` with the protocol
# version this message is served at (so it knows the era); it returns the
# JSON-RPC result or raises MCPError (docs/agents.md, "Remote MCP", lists
# what each era offers).
METHODS: dict[str, Method] = {
    "initialize": Method(initialize, HANDSHAKE),
    "ping": Method(ping, HANDSHAKE),
    "server/discover": Method(discover, MODERN),
    "tools/list": Method(list_tools),
    "tools/call": Method(call_tool),
}
# The revisions that have tasks: 2025-11-25's experimental tasks and
# 2026-07-28's tasks extension.
TASK_ERAS = ("2025-11-25", *MODERN)
METHODS.update({name: Method(handler, TASK_ERAS) for name, handler in tasks.METHODS.items()})


# ---------------------------------------------------------------- the endpoint

@csrf_exempt
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    try:
        request.get_host()
    except DisallowedHost:
        return refusal("validation_error", "This Host is not served here.")
    if not guard.origin_allowed(request):
        logger.warning("refused /mcp from Origin %r", request.headers.get("Origin", "")[:200])
        return refusal("forbidden", "This Origin may not call /mcp (DNS rebinding guard); "
                       "see WAKELEDGER_MCP_ALLOWED_ORIGINS.")
    if request.method == "OPTIONS":
        return guard.preflight(request)
    return guard.with_cors(request, endpoint(request))


def endpoint(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        # No server-sent stream and no session to delete: stateless JSON mode.
        return refusal("method_not_allowed", "POST JSON-RPC messages to /mcp; this server "
                       "offers no event stream and keeps no session.",
                       headers={"Allow": "POST"})
    refused = guard.size_refusal(request)
    if refused is not None:
        return refusal(*refused)
    principal, refused_auth = guard.authenticate(request)
    if principal is None:
        assert refused_auth is not None
        return refused_auth
    wait = guard.rate_limited(principal)
    if wait:
        return refusal("throttled", "Too many /mcp calls with this credential; see "
                       "Retry-After.", headers={"Retry-After": str(wait)})
    if not guard.json_content_type(request):
        return refusal("unsupported_media_type", "POST /mcp with Content-Type: "
                       "application/json (UTF-8).")
    try:
        message = strict_loads(request.body)
    except ValueError as exc:
        return rpc_error(None, PARSE_ERROR, str(exc), status=400)
    flaw = unreadable(message)
    if flaw:
        return rpc_error(None, PARSE_ERROR, flaw, status=400)
    if isinstance(message, list):
        return rpc_error(None, INVALID_REQUEST, "JSON-RPC batches are not accepted.",
                         status=400)
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return rpc_error(None, INVALID_REQUEST, "Send one JSON-RPC 2.0 message.", status=400)
    ident = message.get("id")
    if "id" in message and not valid_id(ident):
        return rpc_error(None, INVALID_REQUEST, "A request's id is a string or an integer.",
                         status=400)
    if "method" in message and not isinstance(message["method"], str):
        return rpc_error(ident, INVALID_REQUEST, "method must be a string.", status=400)
    asked = request.headers.get(MCP_PROTOCOL_VERSION_HEADER)
    if asked is not None and asked not in EVERY_ERA:
        # The prescribed answer to a revision we do not serve, naming those
        # we do (a probing client falls back to one of them).
        return rejected(ident if "method" in message else None,
                        unsupported(asked))
    if "method" not in message or "id" not in message:
        # A notification or a response: nothing to answer (202, no body).
        return HttpResponse(status=202)
    params = message.get("params")
    if params is None:  # absent, or null as some clients send it: no params
        params = {}
    if not isinstance(params, dict):
        return rpc_error(ident, INVALID_PARAMS, "params must be an object.", status=400)
    meta = params.get("_meta")
    if (asked is not None and asked not in HANDSHAKE) or (
            asked is None and isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta):
        return modern_request(request, principal, message, params)
    # The handshake era: the header names the revision (the spec's default
    # when absent); _meta is the client's own, its version key ours.
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta[PROTOCOL_VERSION_META_KEY] = asked or HEADERLESS
    return dispatch(request, principal, ident, message["method"], params, meta)


def modern_request(request: HttpRequest, principal: Principal, message: dict[str, Any],
                   params: dict[str, Any]) -> HttpResponse:
    """2026-07-28: the SDK's ladder over the envelope and the routing headers
    (a request that disagrees with its own headers is refused before the
    version it names is weighed), then the Mcp-Param-* headers of a tool call."""
    ident = message["id"]
    headers = {name: value for name in (MCP_PROTOCOL_VERSION_HEADER, MCP_METHOD_HEADER,
                                        MCP_NAME_HEADER)
               if (value := request.headers.get(name)) is not None}
    verdict = classify_inbound_request(message, headers=headers,
                                       supported_modern_versions=MODERN)
    if isinstance(verdict, InboundLadderRejection):
        return rejected(ident, verdict)
    if message["method"] == "tools/call":
        mismatch = param_headers(request, params)
        if mismatch is not None:
            return rejected(ident, mismatch)
    return dispatch(request, principal, ident, message["method"], params,
                    dict(params["_meta"]))


def dispatch(request: HttpRequest, principal: Principal, ident: Any, method: str,
             params: dict[str, Any], meta: dict[str, Any]) -> HttpResponse:
    era = meta[PROTOCOL_VERSION_META_KEY]
    row = METHODS.get(method)
    try:
        if row is None or era not in row.eras:
            raise MCPError(METHOD_NOT_FOUND, f"Method not found: {method[:100]}")
        if (method, era) in surfaces.CLIENT_REQUESTS:
            try:
                surfaces.validate_client_request(method, era, params)
            except ValidationError as exc:
                raise MCPError(INVALID_PARAMS, f"Invalid params for {method}: "
                               f"{where(exc)}.") from None
        mine = {k: v for k, v in params.items() if k != "_meta"}
        result = row.handler(request, principal, mine, meta)
    except MCPError as fault:
        # 2026-07-28 gives each error code its status; a 2025 client reads a
        # 404 as its session gone, so the handshake era keeps 200.
        status = ERROR_CODE_HTTP_STATUS.get(fault.code, 200) if era in MODERN else 200
        return rpc_error(ident, fault.code, fault.message, status, fault.data)
    if era in MODERN:
        result.setdefault("resultType", "complete")
        stamp = result.get("_meta")
        if not isinstance(stamp, dict) or stamp.get(SERVER_INFO_META_KEY) is None:
            result["_meta"] = {**(stamp if isinstance(stamp, dict) else {}),
                               SERVER_INFO_META_KEY: dumped(server_info())}
    return rpc_result(ident, result)


# ---------------------------------------------------------------- the envelope's checks

def unsupported(asked: str) -> InboundLadderRejection:
    rejection = unsupported_protocol_version_rejection(asked[:64], EVERY_ERA)
    assert rejection is not None  # called only for a revision not in EVERY_ERA
    return rejection


def rejected(ident: Any, rejection: InboundLadderRejection) -> HttpResponse:
    return rpc_error(ident, rejection.code, rejection.message,
                     ERROR_CODE_HTTP_STATUS.get(rejection.code, 400), rejection.data)


def param_headers(request: HttpRequest, params: dict[str, Any]) -> InboundLadderRejection | None:
    """A tool's arguments mirrored into Mcp-Param-* headers must agree with
    the body (none of our tools declares one: then a header claiming one is
    simply not read)."""
    schema = next((tool.input_schema for tool in tools(request)
                   if tool.name == params.get("name")), None)
    arguments = params.get("arguments")
    if schema is None or not isinstance(arguments, dict):
        return None
    return validate_mcp_param_headers(schema, arguments, request.headers)


def valid_id(ident: Any) -> bool:
    # JSON-RPC ids are strings or numbers; MCP forbids null, and a float (or
    # an integer no client could hold) would come back altered.
    if isinstance(ident, str):
        return len(ident) <= 200
    return isinstance(ident, int) and not isinstance(ident, bool) and abs(ident) < 2 ** 63


def unreadable(message: Any) -> str:
    """Why a parsed body cannot be served, or "": nested deeper than any
    message needs, or holding a lone surrogate (JSON's "\\ud800" escape),
    which is not text and cannot be passed on, stored or logged."""
    stack = [(message, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"The body is nested deeper than {MAX_DEPTH} levels."
        if isinstance(value, dict):
            stack.extend((item, depth + 1) for pair in value.items() for item in pair)
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str) and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return "The body holds a lone surrogate (an unpaired \\ud800-\\udfff escape)."
    return ""


def where(exc: ValidationError) -> str:
    """Where a request's params failed the era's schema, without the values."""
    places = [".".join(str(part) for part in error["loc"]) or "params"
              for error in exc.errors()[:3]]
    return ", ".join(places)
