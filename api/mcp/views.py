"""``/mcp``: MCP over streamable HTTP, in the JSON-response mode of the
specification (2025-06-18; also 2025-03-26 and 2025-11-25), stateless.

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
listed), the body size limit, the bearer credential (an API token or an
OAuth access token; the bad-token throttle counts failures per address),
and the per-credential rate limit. A 401 carries ``WWW-Authenticate: Bearer
resource_metadata=…`` (RFC 9728), where an OAuth client starts discovery.
"""

import json
import logging
from importlib import metadata
from typing import Any

import mcp.types as types
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from api.mcp import guard, tasks
from api.mcp.inprocess import (
    DatabaseLeases,
    InProcessApi,
    Principal,
    server_instructions,
    tools,
)
from api.problems import PROBLEM_CONTENT_TYPE, problem
from wakeledger_agent.mcp_calls import ToolCalls

logger = logging.getLogger("wakeledger.mcp")

# Revisions of the initialize handshake we answer; the newest is offered when
# the client asks for one we do not know.
VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602


def refusal(code: str, detail: str, *, headers: dict[str, str] | None = None,
            **extra: Any) -> HttpResponse:
    body = problem(code, detail, **extra)
    response = JsonResponse(body, status=body["status"], content_type=PROBLEM_CONTENT_TYPE)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def rpc_error(ident: Any, code: int, message: str, status: int = 200) -> HttpResponse:
    return JsonResponse({"jsonrpc": "2.0", "id": ident,
                         "error": {"code": code, "message": message}}, status=status)


def rpc_result(ident: Any, result: dict[str, Any]) -> HttpResponse:
    return JsonResponse({"jsonrpc": "2.0", "id": ident, "result": result})


def dumped(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def version() -> str:
    try:
        return metadata.version("wakeledger")
    except metadata.PackageNotFoundError:
        return ""


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
    asked = request.headers.get("MCP-Protocol-Version")
    if asked is not None and asked not in VERSIONS:
        # The specification: an unsupported version header is a 400.
        return rpc_error(None, INVALID_REQUEST, f"Unsupported MCP-Protocol-Version {asked[:40]!r}; "
                         f"this server speaks {', '.join(VERSIONS)}.", status=400)
    try:
        message = json.loads(request.body or b"")
    except ValueError:
        return rpc_error(None, PARSE_ERROR, "The body is not valid JSON.", status=400)
    if isinstance(message, list):
        return rpc_error(None, INVALID_REQUEST, "JSON-RPC batches are not accepted.",
                         status=400)
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return rpc_error(None, INVALID_REQUEST, "Send one JSON-RPC 2.0 message.", status=400)
    if "method" not in message or "id" not in message:
        # A notification or a response: nothing to answer (202, no body).
        return HttpResponse(status=202)
    return answer(request, principal, message)


def answer(request: HttpRequest, principal: Principal, message: dict[str, Any]) -> HttpResponse:
    ident, method = message["id"], message["method"]
    params = message.get("params") or {}
    if not isinstance(params, dict):
        return rpc_error(ident, INVALID_PARAMS, "params must be an object.")
    if method == "initialize":
        asked = params.get("protocolVersion")
        return rpc_result(ident, dumped(types.InitializeResult(
            protocol_version=asked if asked in VERSIONS else VERSIONS[0],
            capabilities=types.ServerCapabilities(tools=types.ToolsCapability(
                list_changed=False), tasks=tasks.SERVER_CAPABILITY),
            server_info=types.Implementation(name="wakeledger", title="Wake Ledger",
                                             version=version()),
            instructions=server_instructions(request))))
    if method == "ping":
        return rpc_result(ident, {})
    if method == "tools/list":
        return rpc_result(ident, dumped(types.ListToolsResult(
            tools=[tasks.advertised(tool) for tool in tools(request)])))
    if method == "tools/call":
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return rpc_error(ident, INVALID_PARAMS, "tools/call needs a name and an "
                             "arguments object.")
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        try:
            if tasks.wants_task(name, params, meta):
                return rpc_result(ident, tasks.create(request, principal, name, arguments,
                                                      params, meta))
        except tasks.RpcFault as fault:
            return rpc_error(ident, fault.code, fault.message)
        api = InProcessApi(request, principal)
        result = ToolCalls(api, DatabaseLeases(principal, api)).call(name, arguments)
        return rpc_result(ident, dumped(result))
    if method in tasks.METHODS:
        try:
            return rpc_result(ident, tasks.METHODS[method](
                request, principal, params, params.get("_meta") or {}))
        except tasks.RpcFault as fault:
            return rpc_error(ident, fault.code, fault.message)
    return rpc_error(ident, METHOD_NOT_FOUND, f"Method not found: {method}")
