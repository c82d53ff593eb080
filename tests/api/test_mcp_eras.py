"""/mcp in both eras of MCP: the 2025 handshake revisions, and 2026-07-28
(server/discover, no initialize and no session, a per-request ``_meta`` the
routing headers repeat, its error codes and HTTP statuses), checked against
the SDK's own types."""

import json
from typing import Any

import mcp_types
import pytest
from django.core.cache import cache
from mcp_types import methods as surfaces

from tests.helpers import issue_agent_token

pytestmark = pytest.mark.django_db

MODERN = "2026-07-28"
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"


@pytest.fixture(autouse=True)
def fresh_counters():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def token():
    return issue_agent_token("era-agent")


def envelope(method: str, params: dict[str, Any] | None = None, *, version: str = MODERN,
             ident: Any = 1) -> dict[str, Any]:
    meta = {VERSION_KEY: version, CAPABILITIES: {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}}
    return {"jsonrpc": "2.0", "id": ident, "method": method,
            "params": {**(params or {}), "_meta": meta}}


def modern(client, token: str, message: dict[str, Any], **headers: str):
    """A 2026-07-28 POST: the routing headers repeat the body, unless a test
    overrides one."""
    routing = {"HTTP_MCP_PROTOCOL_VERSION": message["params"]["_meta"][VERSION_KEY],
               "HTTP_MCP_METHOD": message["method"]}
    if message["method"] == "tools/call":
        routing["HTTP_MCP_NAME"] = message["params"]["name"]
    routing.update(headers)
    routing = {k: v for k, v in routing.items() if v is not None}
    return client.post("/mcp", data=json.dumps(message), content_type="application/json",
                       HTTP_ACCEPT="application/json, text/event-stream",
                       HTTP_AUTHORIZATION=f"Bearer {token}", **routing)


def legacy(client, token: str, message: dict[str, Any], **headers: str):
    return client.post("/mcp", data=json.dumps(message), content_type="application/json",
                       HTTP_ACCEPT="application/json, text/event-stream",
                       HTTP_AUTHORIZATION=f"Bearer {token}", **headers)


def test_a_2026_client_discovers_lists_and_calls_without_a_handshake(client, token):
    found = modern(client, token, envelope("server/discover"))
    assert found.status_code == 200 and "Mcp-Session-Id" not in found
    result = found.json()["result"]
    # The SDK's own parse of a 2026-07-28 discover result accepts it.
    parsed = surfaces.parse_server_result("server/discover", MODERN, result)
    assert MODERN in parsed.supported_versions and parsed.capabilities.tools is not None
    assert "claim_scheduled_continuation" in result["instructions"]
    assert result["resultType"] == "complete" and result["cacheScope"] == "private"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "wakeledger"

    listed = modern(client, token, envelope("tools/list")).json()["result"]
    surfaces.validate_server_result("tools/list", MODERN, listed)
    assert "get_goal" in {tool["name"] for tool in listed["tools"]}

    started = modern(client, token, envelope("tools/call", {"name": "run_goal", "arguments": {
        "goal_key": "m1", "workspace": "/srv/m1", "objective": "o",
        "done_criteria": ["d"]}})).json()["result"]
    surfaces.validate_server_result("tools/call", MODERN, started)
    assert not started.get("isError"), started
    goal_id = started["structuredContent"]["goal"]["id"]
    # The lease it took is kept for this credential, in either era.
    beat = legacy(client, token, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "heartbeat", "arguments": {"goal_id": goal_id}}},
        HTTP_MCP_PROTOCOL_VERSION="2025-11-25").json()["result"]
    assert not beat.get("isError"), beat
    assert "resultType" not in beat  # a 2025 answer in the 2025 schema


def test_a_version_not_served_gets_the_unsupported_version_error_listing_what_is(
        client, token):
    for asked in ("2027-01-01", "2024-11-05"):
        answer = modern(client, token, envelope("server/discover", version=asked))
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert error["code"] == mcp_types.UNSUPPORTED_PROTOCOL_VERSION
        data = mcp_types.UnsupportedProtocolVersionErrorData.model_validate(error["data"])
        assert data.requested == asked
        assert data.supported[0] == MODERN and "2025-11-25" in data.supported
    # Named by the header of a 2025-shaped request too: the same error.
    old = legacy(client, token, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
                 HTTP_MCP_PROTOCOL_VERSION="1999-01-01")
    assert old.status_code == 400
    assert old.json()["error"]["code"] == mcp_types.UNSUPPORTED_PROTOCOL_VERSION


def test_a_2026_request_must_agree_with_its_headers_and_carry_its_envelope(client, token):
    call = envelope("tools/call", {"name": "get_goal", "arguments": {"goal_id": "g"}})
    cases = [
        ({"HTTP_MCP_METHOD": "tools/list"}, "mcp-method"),
        ({"HTTP_MCP_NAME": "run_goal"}, "mcp-name"),
        ({"HTTP_MCP_NAME": None}, "mcp-name"),
        ({"HTTP_MCP_PROTOCOL_VERSION": None}, "mcp-protocol-version"),
    ]
    for headers, named in cases:
        answer = modern(client, token, call, **headers)
        assert answer.status_code == 400, headers
        error = answer.json()["error"]
        assert error["code"] == mcp_types.HEADER_MISMATCH and named in error["message"]
        assert answer.json()["id"] == 1
    bare = {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}}
    answer = legacy(client, token, bare, HTTP_MCP_PROTOCOL_VERSION=MODERN,
                    HTTP_MCP_METHOD="tools/list")
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == mcp_types.INVALID_PARAMS
    assert "_meta" in answer.json()["error"]["message"]


def test_each_era_has_its_own_methods_and_statuses(client, token):
    # 2026-07-28 has no initialize and no ping: not found, a 404 there.
    for method in ("initialize", "ping", "tasks/unknown"):
        answer = modern(client, token, envelope(method))
        assert answer.status_code == 404, method
        assert answer.json()["error"]["code"] == mcp_types.METHOD_NOT_FOUND
    # Invalid params in the 2026 schema: a 400 naming where, not the value.
    bad = modern(client, token, envelope("tools/call", {"name": "get_goal", "arguments": "x"}))
    assert bad.status_code == 400 and bad.json()["error"]["code"] == mcp_types.INVALID_PARAMS
    assert "arguments" in bad.json()["error"]["message"] and "'x'" not in bad.content.decode()
    # The handshake era has no server/discover (the SDK then falls back to
    # initialize) and keeps 200 for an error a handler raises.
    probe = legacy(client, token, {"jsonrpc": "2.0", "id": 5, "method": "server/discover"})
    assert probe.status_code == 200
    assert probe.json()["error"]["code"] == mcp_types.METHOD_NOT_FOUND
    init = legacy(client, token, {"jsonrpc": "2.0", "id": 6, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}).json()["result"]
    assert init["protocolVersion"] == "2025-11-25"
    surfaces.validate_server_result("initialize", "2025-11-25", init)
    # A 2026 client asking initialize for its own revision is offered a 2025 one.
    offered = legacy(client, token, {"jsonrpc": "2.0", "id": 7, "method": "initialize",
                                     "params": {"protocolVersion": MODERN, "capabilities": {},
                                                "clientInfo": {"name": "t", "version": "0"}}})
    assert offered.json()["result"]["protocolVersion"] == "2025-11-25"


def test_null_params_are_no_params_in_either_era(client, token):
    answer = legacy(client, token, {"jsonrpc": "2.0", "id": 8, "method": "tools/list",
                                    "params": None})
    assert answer.status_code == 200 and answer.json()["result"]["tools"]
    refused = legacy(client, token, {"jsonrpc": "2.0", "id": 9, "method": "tools/list",
                                     "params": None}, HTTP_MCP_PROTOCOL_VERSION=MODERN,
                     HTTP_MCP_METHOD="tools/list")
    assert refused.status_code == 400  # 2026-07-28 needs its _meta envelope
    assert refused.json()["error"]["code"] == mcp_types.INVALID_PARAMS


def test_a_2026_notification_is_acknowledged_and_its_version_still_checked(client, token):
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    assert legacy(client, token, note, HTTP_MCP_PROTOCOL_VERSION=MODERN).status_code == 202
    refused = legacy(client, token, note, HTTP_MCP_PROTOCOL_VERSION="2099-01-01")
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == mcp_types.UNSUPPORTED_PROTOCOL_VERSION
