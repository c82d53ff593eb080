"""/mcp fuzzed by schemathesis, as the REST API is (tests/api/test_openapi_contract.py).

/mcp is JSON-RPC, not REST, so it is not in the API's OpenAPI document; this
test writes one for it, whose request body is the union of the MCP SDK's own
JSON schemas of the messages a client sends in each era (2025-11-25 and
2026-07-28), and whose version header ranges over the revisions served and
one that is not. Whatever schemathesis builds from that (valid and invalid
by the schema: ``--mode all``) must be answered
with a declared status and content type, and never a 5xx. (The deep part of
/mcp's fuzzing, with the envelope and headers kept in step so the tools are
reached, is the hypothesis test in tests/api/test_mcp_hostile_input.py.)
"""

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Union

import pytest
import yaml
from pydantic import TypeAdapter

from tests.helpers import issue_agent_token

MAX_EXAMPLES = 25


def mcp_openapi() -> dict[str, Any]:
    import mcp_types._v2025_11_25 as v2025
    import mcp_types._v2026_07_28 as v2026

    messages = Union[  # noqa: UP007 (a runtime union of classes for the adapter)
        v2026.DiscoverRequest, v2026.ListToolsRequest, v2026.CallToolRequest,
        v2025.InitializeRequest, v2025.PingRequest, v2025.ListToolsRequest,
        v2025.CallToolRequest]
    body = TypeAdapter(messages).json_schema(ref_template="#/components/schemas/{model}")
    schemas = body.pop("$defs")
    problem = {"application/problem+json": {"schema": {"type": "object"}}}
    rpc = {"application/json": {"schema": {"type": "object", "required": ["jsonrpc"]}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "/mcp (JSON-RPC, both eras)", "version": "1"},
        "paths": {"/mcp": {"post": {
            "operationId": "mcp_message",
            "parameters": [
                {"name": "MCP-Protocol-Version", "in": "header", "required": False,
                 "schema": {"type": "string", "enum": ["2026-07-28", "2025-11-25", "2025-06-18",
                                                       "2025-03-26", "1999-01-01"]}},
                {"name": "Mcp-Method", "in": "header", "required": False,
                 "schema": {"type": "string", "enum": ["server/discover", "tools/list",
                                                       "tools/call"]}},
            ],
            "requestBody": {"required": True,
                            "content": {"application/json": {"schema": body}}},
            "responses": {
                "200": {"description": "a JSON-RPC answer", "content": rpc},
                "202": {"description": "a notification, acknowledged"},
                "400": {"description": "a JSON-RPC error the envelope earned", "content": rpc},
                "404": {"description": "-32601 in 2026-07-28", "content": rpc},
                "413": {"description": "too large", "content": problem},
                "415": {"description": "not JSON", "content": problem},
                "429": {"description": "throttled", "content": problem},
            }}}},
        "components": {"schemas": schemas},
    }


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_mcp_holds_under_schemathesis(live_server, tmp_path, capsys, settings):
    settings.WAKELEDGER_MCP_CALLS_PER_MINUTE = 1_000_000
    token = issue_agent_token("mcp-fuzz")
    document = tmp_path / "mcp-openapi.yaml"
    document.write_text(yaml.safe_dump(mcp_openapi()))
    command = [
        str(Path(sys.executable).with_name("schemathesis")), "run", str(document),
        "--url", live_server.url, "--header", f"Authorization: Bearer {token}",
        "--checks", "not_a_server_error,status_code_conformance,content_type_conformance",
        "--phases", "examples,fuzzing", "--mode", "all", "--max-examples", str(MAX_EXAMPLES),
        "--generation-deterministic", "--workers", "1", "--request-timeout", "30",
        "--suppress-health-check", "all", "--continue-on-failure", "--no-color",
    ]
    env = {**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_TELEMETRY": "false", "COLUMNS": "120"}
    began = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False,
                            env=env, cwd=tmp_path)
    summary = result.stdout[result.stdout.rfind("SUMMARY") - 40:]
    with capsys.disabled():
        cases = next((line.strip() for line in summary.splitlines()
                      if " generated, " in line), "?")
        print(f"\nschemathesis on /mcp: {cases} in {time.monotonic() - began:.1f} s")
    assert result.returncode == 0, f"{result.stdout[-12000:]}\n{result.stderr[-3000:]}"
    assert " passed" in summary and "failure" not in summary.lower(), summary
