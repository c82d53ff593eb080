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
``validation_error`` it gets over REST. What each tool does is in
``mcp_calls``, shared with the product's own ``/mcp`` (streamable HTTP).
"""

import logging
import sys
from collections.abc import Mapping
from importlib import metadata

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from wakeledger_agent import client
from wakeledger_agent.client import ApiError, Client
from wakeledger_agent.errors import EXIT_AUTH, EXIT_NETWORK, EXIT_USAGE, CliError
from wakeledger_agent.leases import FileLeases, MemoryLeases
from wakeledger_agent.mcp_calls import REDACTED, ToolCalls, instructions
from wakeledger_agent.mcp_tools import SPECS, build_tools, json_schema

__all__ = ["REDACTED", "SPECS", "Tools", "json_schema", "main"]

logger = logging.getLogger("wakeledger.mcp")

LeaseStore = MemoryLeases | FileLeases


class Tools:
    """The SDK's handlers over the shared tool calls (``mcp_calls``): each
    call runs in a worker thread, as the HTTP client blocks."""

    def __init__(self, api: Client, tools: list[types.Tool], leases: LeaseStore | None = None):
        self.api = api
        self.tools = tools
        self.leases = MemoryLeases() if leases is None else leases
        self.calls = ToolCalls(lambda method, path, body: api.call(method, path, body),
                               self.leases)

    async def list_tools(self, ctx: ServerRequestContext,
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools)

    async def call_tool(self, ctx: ServerRequestContext,
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        name, arguments = params.name, dict(params.arguments or {})
        return await anyio.to_thread.run_sync(lambda: self.calls.call(name, arguments))


# ---------------------------------------------------------------- start-up


def load(api: Client) -> tuple[list[types.Tool], str]:
    """The tools (from the API's OpenAPI document) and the instructions (its skill
    document), both from the server this process talks to."""
    openapi = api.call("GET", "schema?format=json", auth=False)
    skill = api.call("GET", "skill.md", auth=False, raw=True)
    # The token is checked now, so a wrong one fails here, where the host's
    # log shows it, instead of on the agent's first call.
    api.call("GET", "goals?page_size=1")
    return build_tools(openapi), instructions(api.base, skill)


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
