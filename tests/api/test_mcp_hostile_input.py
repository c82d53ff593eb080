"""/mcp under hostile input: every body a client should not send is a 4xx
with a stable code (never a 500, nothing recorded), a browser page from a
listed Origin gets its CORS answers (others nothing), ``/mcp/`` is ``/mcp``;
and a JSON-RPC fuzz over the methods and their params' shapes."""

import json
from typing import Any

import pytest
from django.core.cache import cache
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import issue_agent_token

pytestmark = pytest.mark.django_db

PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'


@pytest.fixture(autouse=True)
def fresh_counters():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def token():
    return issue_agent_token("hostile-agent")


def strict_loads(content: bytes) -> Any:
    """JSON as the RFC has it: NaN and Infinity are not JSON."""
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")
    return json.loads(content, parse_constant=refuse)


def post(client, token: str, body: bytes | str, content_type: str = "application/json",
         **headers: str):
    client.raise_request_exception = False  # a 500 is an answer to look at here
    # CONTENT_TYPE as sent even with no body (the test client drops it then).
    return client.post("/mcp", data=body, content_type=content_type,
                       HTTP_ACCEPT="application/json, text/event-stream",
                       HTTP_AUTHORIZATION=f"Bearer {token}", CONTENT_TYPE=content_type,
                       **headers)


def get_goal(goal_id: str) -> str:
    return ('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": '
            '{"name": "get_goal", "arguments": {"goal_id": ' + goal_id + '}}}')


DEEP = '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": ' + "[" * 2000 \
    + "]" * 2000 + "}}"

# body, content type -> status, JSON-RPC code (or the problem's code)
HOSTILE = {
    "nested 2,000 deep": (DEEP, "application/json", 400, -32700),
    "nested 100 deep": ('{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": '
                        + "[" * 100 + "]" * 100 + "}}", "application/json", 400, -32700),
    "a lone surrogate as goal_id": (get_goal('"\\ud800"'), "application/json", 400, -32700),
    "a lone surrogate as a key": ('{"jsonrpc": "2.0", "id": 1, "method": "ping", '
                                  '"params": {"\\udfff": 1}}', "application/json", 400, -32700),
    "a number of 5,000 digits": (get_goal("9" * 5000), "application/json", 400, -32700),
    "an id of 4,000 digits": ('{"jsonrpc": "2.0", "id": ' + "9" * 4000 + ', "method": "ping"}',
                              "application/json", 400, -32600),
    "an id past 2^63": ('{"jsonrpc": "2.0", "id": 9223372036854775808, "method": "ping"}',
                        "application/json", 400, -32600),
    "an id of 1e999": ('{"jsonrpc": "2.0", "id": 1e999, "method": "ping"}',
                       "application/json", 400, -32600),
    "an id NaN": ('{"jsonrpc": "2.0", "id": NaN, "method": "ping"}', "application/json", 400,
                  -32700),
    "an id that is an object": ('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}',
                                "application/json", 400, -32600),
    "a method that is a number": ('{"jsonrpc": "2.0", "id": 1, "method": 5}',
                                  "application/json", 400, -32600),
    "duplicate keys": ('{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "ping"}',
                       "application/json", 400, -32700),
    "no body": ("", "application/json", 400, -32700),
    "a UTF-16 body": (PING.decode().encode("utf-16"), "application/json", 400, -32700),
    "a UTF-8 BOM": (b"\xef\xbb\xbf" + PING, "application/json", 400, -32700),
    "text/plain": (PING, "text/plain", 415, "unsupported_media_type"),
    "form-encoded": (PING, "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
    "JSON in UTF-16 by its charset": (PING, "application/json; charset=utf-16", 415,
                                      "unsupported_media_type"),
    "no content type": (PING, "", 415, "unsupported_media_type"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_body_is_a_4xx_with_a_stable_code(client, token, name):
    body, kind, status, code = HOSTILE[name]
    answer = post(client, token, body, kind)
    assert answer.status_code == status, answer.content[:300]
    found = answer.json()
    assert (found["error"]["code"] if "error" in found else found["code"]) == code
    strict_loads(answer.content)  # strict JSON back: no NaN or Infinity echoed


def test_a_hostile_body_in_the_2026_era_is_refused_the_same_way(client, token):
    for name in ("nested 2,000 deep", "a lone surrogate as goal_id", "a UTF-16 body"):
        body, kind, status, code = HOSTILE[name]
        answer = post(client, token, body, kind, HTTP_MCP_PROTOCOL_VERSION="2026-07-28")
        assert answer.status_code == status and answer.json()["error"]["code"] == code


def test_a_utf8_charset_and_odd_case_are_json(client, token):
    for kind in ("application/json; charset=utf-8", "Application/JSON; charset=UTF-8"):
        assert post(client, token, PING, kind).status_code == 200, kind


def test_a_listed_origin_gets_its_preflight_and_cors_headers_others_nothing(
        client, token, settings):
    settings.WAKELEDGER_MCP_ALLOWED_ORIGINS = ["https://app.example"]
    asked = {"HTTP_ORIGIN": "https://app.example", "HTTP_ACCESS_CONTROL_REQUEST_METHOD": "POST",
             "HTTP_ACCESS_CONTROL_REQUEST_HEADERS": "authorization, content-type, "
                                                     "mcp-protocol-version, mcp-param-region"}
    preflight = client.options("/mcp", **asked)
    assert preflight.status_code == 204
    assert preflight["Access-Control-Allow-Origin"] == "https://app.example"
    assert "POST" in preflight["Access-Control-Allow-Methods"]
    allowed = {h.strip().lower() for h in preflight["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "content-type", "mcp-session-id", "mcp-protocol-version",
            "mcp-method", "mcp-name", "mcp-param-region"} <= allowed
    assert "Origin" in preflight["Vary"]
    # The answers themselves let the page read what MCP needs, the 401's
    # challenge (where OAuth discovery starts) included.
    answered = post(client, token, PING, HTTP_ORIGIN="https://app.example")
    assert answered.status_code == 200
    assert answered["Access-Control-Allow-Origin"] == "https://app.example"
    exposed = {h.strip().lower() for h in answered["Access-Control-Expose-Headers"].split(",")}
    assert {"mcp-session-id", "www-authenticate"} <= exposed
    challenged = client.post("/mcp", data=PING, content_type="application/json",
                             HTTP_ORIGIN="https://app.example")
    assert challenged.status_code == 401
    assert challenged["Access-Control-Allow-Origin"] == "https://app.example"
    # Another Origin: refused, and told nothing a browser would honour.
    other = client.options("/mcp", **{**asked, "HTTP_ORIGIN": "https://evil.example"})
    assert other.status_code == 403 and "Access-Control-Allow-Origin" not in other
    refused = post(client, token, PING, HTTP_ORIGIN="https://evil.example")
    assert refused.status_code == 403 and "Access-Control-Allow-Origin" not in refused
    # A program (no Origin): no CORS headers at all.
    assert "Access-Control-Allow-Origin" not in post(client, token, PING)


def test_mcp_with_a_trailing_slash_is_the_same_endpoint(client, token):
    answer = client.post("/mcp/", data=PING, content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {token}")
    assert answer.status_code == 200 and answer.json()["result"] == {}
    unauthenticated = client.post("/mcp/", data=PING, content_type="application/json")
    assert unauthenticated.status_code == 401
    assert "resource_metadata=" in unauthenticated["WWW-Authenticate"]


# ---------------------------------------------------------------- the fuzz

METHODS = ["initialize", "ping", "server/discover", "tools/list", "tools/call", "tasks/get",
           "tasks/result", "tasks/cancel", "resources/list", "notifications/initialized", "",
           "\ud800"]
TOOLS = ["get_goal", "run_goal", "checkpoint_goal", "heartbeat", "finish_goal", "resume_goal",
         "no_such_tool", "\ud800"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2 ** 70),
                                                          max_value=2 ** 70),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=8), st.sampled_from(["\ud800", "x" * 300, "../..", "%00"]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8)
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
goal_ids = st.one_of(st.sampled_from(["\ud800", "g-1", "", "a/b", "x" * 300]), values)
tool_arguments = st.fixed_dictionaries({"goal_id": goal_ids}, optional={
    "goal_key": values, "workspace": values, "objective": values, "done_criteria": values,
    "progress_pct": values, "current_step": values, "status": values, "summary": values})
arguments = st.one_of(values, tool_arguments)
params = st.one_of(values, st.fixed_dictionaries({}, optional={
    "name": st.one_of(st.sampled_from(TOOLS), values), "arguments": arguments,
    "protocolVersion": st.sampled_from(["2025-11-25", "2026-07-28", "x"]),
    "capabilities": values, "clientInfo": values, "taskId": values, "cursor": values,
    "_meta": st.one_of(values, st.just(META))}))
# Mostly well-formed envelopes (so the fuzz reaches the handlers and the
# tools behind them), sometimes anything.
wellformed = st.fixed_dictionaries({
    "jsonrpc": st.just("2.0"), "id": st.integers(min_value=0, max_value=2 ** 40),
    "method": st.sampled_from(["tools/call", "tools/call", *METHODS]),
    "params": st.fixed_dictionaries({"name": st.sampled_from(TOOLS),
                                     "arguments": tool_arguments},
                                    optional={"_meta": st.just(META)})})
anything = st.fixed_dictionaries({"jsonrpc": st.sampled_from(["2.0", "2.0", "1.0"]),
                                  "method": st.one_of(st.sampled_from(METHODS), values)},
                                 optional={"id": st.one_of(st.integers(), st.text(max_size=5),
                                                           values),
                                           "params": params})
messages = st.one_of(wellformed, wellformed, anything)
versions = st.sampled_from([None, "2025-11-25", "2025-03-26", "2026-07-28", "2026-07-28",
                            "1999-01-01"])


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(message=messages, version=versions, name_header=st.booleans())
def test_no_jsonrpc_message_makes_mcp_fail(client, token, message, version, name_header):
    headers: dict[str, str] = {}
    if version is not None:
        headers["HTTP_MCP_PROTOCOL_VERSION"] = version
    if isinstance(message.get("method"), str) and message["method"].isascii():
        headers["HTTP_MCP_METHOD"] = message["method"]
    name = (message.get("params") or {}).get("name") if isinstance(message.get("params"),
                                                                     dict) else None
    if name_header and isinstance(name, str) and name.isascii() and name.isprintable():
        headers["HTTP_MCP_NAME"] = name
    body = json.dumps(message)
    answer = post(client, token, body, **headers)
    assert answer.status_code < 500, (body[:300], answer.content[:300])
    if answer.status_code != 202:
        found = strict_loads(answer.content)  # strict JSON back, always
        assert "error" in found or "result" in found or "code" in found
