"""/mcp: MCP over streamable HTTP served by the product (api/mcp/), driven by
the MCP SDK's own streamable HTTP client against a live server."""

import json
import time
import urllib.error
import urllib.request
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from wakeledger_agent.mcp_calls import REDACTED
from wakeledger_agent.mcp_tools import SPECS, build_tools

WAITING = {"not_due", "worker_busy_noop"}


@pytest.fixture
def tokens(transactional_db):
    from tests.helpers import issue_agent_token

    return issue_agent_token("http-agent"), issue_agent_token("other-agent")


def post(url: str, body: Any, headers: dict[str, str] | None = None
         ) -> tuple[int, dict[str, str], Any]:
    """One raw POST: status, headers, JSON body (or None)."""
    data = json.dumps(body).encode() if not isinstance(body, bytes) else body
    request = urllib.request.Request(url, data=data, method="POST", headers={  # noqa: S310
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            content = answer.read()
            return answer.status, dict(answer.headers), json.loads(content) if content else None
    except urllib.error.HTTPError as error:
        content = error.read()
        return error.code, dict(error.headers), json.loads(content) if content else None


def connect(url: str, token: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    return Client(streamable_http_client(url, http_client=http))


class Session:
    def __init__(self, client: Client):
        self.client = client
        self.texts: list[str] = []

    async def call(self, name: str, **arguments: Any) -> Any:
        result = await self.client.call_tool(name, arguments)
        self.texts += [block.text for block in result.content]
        return result

    async def ok(self, name: str, **arguments: Any) -> dict[str, Any]:
        result = await self.call(name, **arguments)
        assert not result.is_error, (name, result.content)
        assert json.loads(result.content[0].text) == result.structured_content
        return result.structured_content


async def lnwjud(session: Session, goal_key: str) -> str:
    """The lnwjud protocol over /mcp: run, checkpoint, prepare the one
    watchdog, its receipt, release; the scheduled task's claim; the verified
    finish and the cancellation receipt. Returns the goal's id."""
    started = await session.ok(
        "run_goal", goal_key=goal_key, workspace=f"/srv/{goal_key}",
        objective="Exercise /mcp", done_criteria=["finished"], next_actions=["finish"],
        policy={"scheduler": "host", "cadence_minutes": 1})
    goal_id = started["goal"]["id"]
    assert started["acquired"] is True and started["lease"]["token"] == REDACTED
    assert (await session.ok("checkpoint_goal", goal_id=goal_id, current_step="half",
                             progress_pct=40))["checkpoint"]["progress_pct"] == 40
    prepared = await session.ok("prepare_scheduled_continuation", goal_id=goal_id,
                                tzid="Asia/Bangkok")
    schedule = prepared["host_schedule"]
    receipt = await session.ok("record_watchdog_receipt", goal_id=goal_id, status="created",
                               host_ref="chatgpt-task-1", due_at=schedule["first_due_at"],
                               runs_on="unverified")
    assert receipt["watchdog"]["status"] == "live"
    await session.ok("checkpoint_goal", goal_id=goal_id, current_step="turn ends",
                     progress_pct=50, release_lease=True)
    fenced = await session.call("heartbeat", goal_id=goal_id)
    assert fenced.is_error and fenced.structured_content["code"] == "lease_required"
    # The scheduled task fires: claim first, work only once it is ours.
    deadline = time.monotonic() + 30
    n = 0
    while True:
        n += 1
        claim = await session.ok("claim_scheduled_continuation", goal_id=goal_id,
                                 occurrence_id=f"tick-{n}")
        if claim["outcome"] == "recurring_acquired":
            break
        assert claim["outcome"] in WAITING, claim
        assert time.monotonic() < deadline
        await anyio.sleep(min(max(claim["retry_after_seconds"] or 1, 0.2), 2))
    assert claim["lease"]["token"] == REDACTED
    await session.ok("checkpoint_goal", goal_id=goal_id, current_step="done", progress_pct=100,
                     completed=["finish"])
    await session.ok("cancel_scheduled_continuation", goal_id=goal_id)
    cancelled = await session.ok("record_watchdog_receipt", goal_id=goal_id, status="cancelled")
    assert cancelled["watchdog"]["status"] in ("cancelled", "none"), cancelled
    finished = await session.ok("finish_goal", goal_id=goal_id, status="completed",
                                summary="all done", evidence=[
                                    {"criterion": "finished", "evidence": "checkpoint 100 %"}])
    assert finished["completion_state"] == "completed", finished
    assert (await session.ok("get_goal", goal_id=goal_id))["status"] == "done"
    assert not any("wll_" in text for text in session.texts)
    return goal_id


@pytest.mark.slow  # a live server and the SDK's client
def test_the_sdk_client_runs_a_goal_over_mcp(live_server, tokens, settings):
    settings.WAKELEDGER_CADENCE_UNIT_SECONDS = 1
    mine, other = tokens
    url = f"{live_server.url}/mcp"
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        async with connect(url, mine) as client:
            assert "claim_scheduled_continuation" in client.instructions
            listed = (await client.list_tools()).tools
            seen["tools"] = [tool.model_dump(mode="json", by_alias=True) for tool in listed]
            session = Session(client)
            seen["goal"] = await lnwjud(session, "http-1")
            bad = await session.call("checkpoint_goal", goal_id=seen["goal"],
                                     current_step="x", progress_pct=150)
            assert bad.is_error and bad.structured_content["code"] == "validation_error"
        # Another agent sees nothing of it.
        async with connect(url, other) as client:
            hidden = await client.call_tool("get_goal", {"goal_id": seen["goal"]})
            assert hidden.is_error and hidden.structured_content["code"] == "not_found"

    anyio.run(scenario)
    # The same tool table as stdio's: built from the API's OpenAPI document.
    with urllib.request.urlopen(f"{live_server.url}/api/v1/schema?format=json",  # noqa: S310
                                timeout=10) as answer:
        openapi = json.loads(answer.read())
    expected = [tool.model_dump(mode="json", by_alias=True) for tool in build_tools(openapi)]
    assert seen["tools"] == expected and {t["name"] for t in expected} == set(SPECS)
