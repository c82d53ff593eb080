"""`wakeledger mcp` over stdio, driven by the MCP SDK's own client against a live
server: the tools an agent sees, a goal from run_goal through a rate limit and a
host-fired wake to its finish, the ledger's events, and tool errors that keep
the problem code."""

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from api import serializers
from wakeledger_agent.mcp_server import REDACTED, SPECS, json_schema

pytestmark = pytest.mark.django_db(transaction=True)

TOOL_NAMES = {
    "run_goal", "checkpoint_goal", "heartbeat", "report_run", "request_approval", "track_job",
    "update_job", "prepare_scheduled_continuation", "claim_scheduled_continuation",
    "cancel_scheduled_continuation", "record_watchdog_receipt", "finish_goal", "get_goal",
    "get_scheduled_continuation", "resume_goal", "await_goal",
}
# What a claim may answer while the wake is not yet this agent's (docs/api.md, Wakes).
WAITING = {"not_due", "worker_busy_noop"}


@pytest.fixture
def agent_token(transactional_db):
    from tests.helpers import issue_agent_token

    return issue_agent_token("mcp-agent")


@pytest.fixture
def fast_wakes(settings):
    # The live server runs in this process: a cadence "minute" is a second and
    # a rate limit resumes right at the provider's reset.
    settings.WAKELEDGER_CADENCE_UNIT_SECONDS = 1
    settings.WAKELEDGER_RESET_MARGIN_SECONDS = 0


def server_params(url: str, token: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "wakeledger_agent.cli", "mcp"],
        env={"WAKELEDGER_URL": url, "WAKELEDGER_TOKEN": token, "WAKELEDGER_TIMEOUT": "10"})


class Session:
    """Tool calls that keep every result, so the test can check none leaks a token."""

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
        # The text is the same JSON as the structured content.
        assert json.loads(result.content[0].text) == result.structured_content
        return result.structured_content


def events(url: str, token: str, goal_id: str) -> list[dict[str, Any]]:
    request = urllib.request.Request(f"{url}/goals/{goal_id}/events?limit=1000",  # noqa: S310
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
        return json.loads(answer.read())["events"]


@pytest.mark.slow  # real processes or many examples: not in make test-quick
def test_a_goal_through_the_mcp_server(live_server, agent_token, fast_wakes):
    url = f"{live_server.url}/api/v1"
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        with tempfile.TemporaryFile("w+") as errlog:
            async with Client(stdio_client(server_params(url, agent_token),
                                           errlog=errlog)) as client:
                await drive(client, url, seen)
            errlog.seek(0)
            seen["stderr"] = errlog.read()

    anyio.run(scenario)
    print(seen["stderr"])
    # What the server logs (the host's log) names the API, never a secret.
    assert f"serving 16 tools for {url}" in seen["stderr"]
    assert agent_token not in seen["stderr"] and "wll_" not in seen["stderr"]

    history = events(url, agent_token, seen["goal_id"])
    # The ledger tells the same story, in order; every claim is recorded with
    # its outcome, the waiting ones too.
    story = [("goal.started", None), ("lease.acquired", None), ("checkpoint.recorded", None),
             ("wake.scheduled", None), ("receipt.recorded", None), ("run.reported", None),
             ("goal.paused", None), ("lease.released", None),
             ("wake.claimed", "recurring_acquired"), ("lease.acquired", None),
             ("checkpoint.recorded", None), ("goal.finish_requested", None),
             ("receipt.recorded", None), ("goal.completed", None)]
    position = 0
    for event in history:
        kind, outcome = story[position] if position < len(story) else ("", None)
        if event["kind"] == kind and outcome in (None, event["data"].get("outcome")):
            position += 1
    assert position == len(story), [e["kind"] for e in history]
    claims = [e["data"]["outcome"] for e in history if e["kind"] == "wake.claimed"]
    assert claims == seen["claims"]
    granted = next(e for e in history if e["kind"] == "wake.claimed"
                   and e["data"]["outcome"] == "recurring_acquired")
    # The wake was granted only once the pause was over.
    assert granted["recorded_at"] >= seen["paused_until"].replace("Z", "+00:00")
    assert "wll_" not in json.dumps(history)


async def drive(client: Client, url: str, seen: dict[str, Any]) -> None:
    session = Session(client)
    # The instructions are the served skill document, for this server, with
    # the protocol told in tool names.
    assert url in client.instructions
    assert "claim_scheduled_continuation" in client.instructions

    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == TOOL_NAMES == set(SPECS)
    for tool in tools.values():
        Draft202012Validator.check_schema(tool.input_schema)
        assert tool.input_schema["type"] == "object" and tool.description
        assert "lease" not in tool.input_schema["properties"]  # the server adds it
    # Descriptions are the API's own words.
    run = tools["report_run"].input_schema["properties"]
    assert run["retry_after"]["description"] == \
        serializers.RunSerializer().fields["retry_after"].help_text
    assert tools["checkpoint_goal"].input_schema["properties"]["release_lease"]["description"] \
        == serializers.CheckpointSerializer().fields["release_lease"].help_text
    assert tools["checkpoint_goal"].description.startswith("Record a checkpoint (fenced).")
    assert tools["get_goal"].annotations.read_only_hint is True
    # finish_goal asks for evidence, one {criterion, evidence} item per done criterion.
    evidence = tools["finish_goal"].input_schema["properties"]["evidence"]
    assert evidence["description"] == serializers.FinishSerializer().fields["evidence"].help_text
    assert evidence["items"]["required"] == ["criterion", "evidence"]
    policy = tools["run_goal"].input_schema["properties"]["policy"]["properties"]
    assert policy["scheduler"]["enum"] == ["internal", "host"]
    assert policy["scheduler"]["description"] == \
        serializers.PolicySerializer().fields["scheduler"].help_text

    started = await session.ok(
        "run_goal", goal_key="mcp-1", workspace="/srv/repos/mcp",
        objective="Exercise the MCP server", done_criteria=["finished"],
        next_actions=["checkpoint", "finish"],
        policy={"scheduler": "host", "cadence_minutes": 1})
    goal_id = seen["goal_id"] = started["goal"]["id"]
    assert started["acquired"] is True and started["lease"]["token"] == REDACTED

    checkpoint = await session.ok("checkpoint_goal", goal_id=goal_id, current_step="half way",
                                  progress_pct=40, completed=["checkpoint"],
                                  next_actions=["finish"])
    assert checkpoint["checkpoint"]["progress_pct"] == 40
    assert (await session.ok("heartbeat", goal_id=goal_id))["generation"] == 1

    # A bad call is a tool error that keeps the problem code.
    bad = await session.call("checkpoint_goal", goal_id=goal_id, current_step="x",
                             progress_pct=150)
    assert bad.is_error and bad.content[0].text.startswith("validation_error (400)")
    assert bad.structured_content["code"] == "validation_error"
    assert "progress_pct" in bad.structured_content["errors"]
    copied = await session.call("heartbeat", goal_id=goal_id,
                                lease={"token": "wll_x", "generation": 1})
    assert copied.is_error and copied.structured_content["code"] == "validation_error"
    missing = await session.call("get_goal", goal_id="00000000-0000-0000-0000-000000000000")
    assert missing.is_error and missing.structured_content["code"] == "not_found"
    typo = await session.call("get_goal", goal_id=goal_id, goal_key="mcp-1")
    assert typo.is_error and typo.structured_content["errors"] == {"goal_key": ["Unknown field."]}
    unknown = await session.call("finish_goal", goal_id=goal_id, status="completed", sumary="x")
    assert unknown.is_error and "sumary" in unknown.structured_content["errors"]

    # The host watchdog: the schedule the host creates, then its receipt.
    prepared = await session.ok("prepare_scheduled_continuation", goal_id=goal_id,
                                tzid="Europe/Istanbul")
    schedule = prepared["host_schedule"]
    assert schedule["destination"]["url"].endswith(f"/goals/{goal_id}/claim")
    receipt = await session.ok("record_watchdog_receipt", goal_id=goal_id, status="created",
                               host_ref="openclaw-cron-7f3a", due_at=schedule["first_due_at"],
                               runs_on="local")
    assert receipt["watchdog"]["status"] == "live"

    # A rate limit with a short Retry-After: paused, the lease released.
    limited = await session.ok("report_run", goal_id=goal_id, outcome="error",
                               error_text="429 Too Many Requests: rate limit exceeded",
                               retry_after="2")
    assert limited["classification"] == "rate_limit" and limited["status"] == "paused"
    seen["paused_until"] = limited["paused_until"]
    # The server forgot the released lease: a fenced call says what to do.
    fenced = await session.call("checkpoint_goal", goal_id=goal_id, current_step="late",
                                progress_pct=50)
    assert fenced.is_error and fenced.structured_content["code"] == "lease_required"
    assert "resume_goal" in fenced.content[0].text

    # The host's watchdog fires: claim first, until the wake is ours.
    outcomes = []
    deadline = time.monotonic() + 30
    while True:
        claim = await session.ok("claim_scheduled_continuation", goal_id=goal_id,
                                 occurrence_id=f"openclaw-run-{len(outcomes) + 1}")
        outcomes.append(claim["outcome"])
        if claim["outcome"] == "recurring_acquired":
            break
        assert claim["outcome"] in WAITING, claim
        assert time.monotonic() < deadline, outcomes
        await anyio.sleep(min(max(claim["retry_after_seconds"] or 1, 0.2), 3))
    assert claim["lease"]["token"] == REDACTED
    assert claim["resume_packet"]["next_actions"] == ["finish"]
    assert claim["report"]["resumed_from_checkpoint"] is not None

    # The claim's lease is held by the server: fenced calls just work.
    done = await session.ok("checkpoint_goal", goal_id=goal_id, current_step="finished",
                            progress_pct=100, completed=["finish"])
    assert done["checkpoint"]["progress_pct"] == 100
    finished = await session.ok("finish_goal", goal_id=goal_id, status="completed",
                                summary="all done", evidence=[
                                    {"criterion": "finished", "evidence": "checkpoint at 100 %"}])
    assert finished["completion_state"] == "pending_native_cleanup"
    wake = await session.ok("get_scheduled_continuation", goal_id=goal_id)
    assert wake["watchdog"]["status"] == "cancel_requested"
    cancelled = await session.ok("record_watchdog_receipt", goal_id=goal_id, status="cancelled")
    assert cancelled["completion_state"] == "completed"
    assert (await session.ok("get_goal", goal_id=goal_id))["status"] == "done"

    # No result ever showed a lease token.
    assert not any("wll_" in text for text in session.texts)
    seen["claims"] = outcomes


@pytest.mark.slow  # real processes or many examples: not in make test-quick
def test_the_other_tools_and_a_lost_lease(live_server, agent_token, settings):
    """Two MCP server processes on one goal: the second takes over the first's
    stale lease, and the first is fenced off with lease_lost."""
    settings.WAKELEDGER_STALE_GRACE_SECONDS = 0
    url = f"{live_server.url}/api/v1"

    async def scenario() -> None:
        with tempfile.TemporaryFile("w+") as errlog:
            async with (Client(stdio_client(server_params(url, agent_token),
                                            errlog=errlog)) as first,
                        Client(stdio_client(server_params(url, agent_token),
                                            errlog=errlog)) as second):
                await two_workers(Session(first), Session(second))

    anyio.run(scenario)


async def two_workers(one: Session, two: Session) -> None:
    started = await one.ok("run_goal", goal_key="mcp-2", workspace="/srv/repos/mcp2",
                           objective="Two workers", next_actions=["build"],
                           policy={"lease_seconds": 5})
    goal_id = started["goal"]["id"]
    # Starting again in the same process: the API refuses a second lease, and
    # the server says it still holds the first one.
    again = await one.call("run_goal", goal_key="mcp-2", workspace="/srv/repos/mcp2",
                           objective="Two workers")
    assert not again.is_error and again.structured_content["acquired"] is False
    assert "still holds generation 1" in again.content[1].text
    assert (await one.ok("heartbeat", goal_id=goal_id))["generation"] == 1
    # The second worker's run_goal is refused while the lease is live.
    refused = await two.ok("run_goal", goal_key="mcp-2", workspace="/srv/repos/mcp2",
                           objective="Two workers")
    assert refused["acquired"] is False and refused["retry_after_seconds"] > 0

    job = (await one.ok("track_job", goal_id=goal_id, kind="ci_run", ref="gh-run-1"))["job"]
    updated = await one.ok("update_job", goal_id=goal_id, job_id=job["job_id"],
                           status="succeeded", conclusion="green")
    assert updated["job"]["status"] == "succeeded"
    prepared = await one.ok("prepare_scheduled_continuation", goal_id=goal_id)
    assert prepared["watchdog"]["backend"] == "internal"
    cancelled = await one.ok("cancel_scheduled_continuation", goal_id=goal_id)
    assert cancelled["watchdog"]["status"] == "cancelled"

    # The first worker goes silent; past expiry (and a zero grace) the second
    # takes over with generation 2 and gets the resume packet.
    await anyio.sleep(5.5)
    resumed = await two.ok("resume_goal", goal_id=goal_id)
    assert resumed["acquired"] is True and resumed["lease"]["generation"] == 2
    assert resumed["lease"]["token"] == REDACTED
    assert resumed["resume_packet"]["next_actions"] == ["build"]
    lost = await one.call("checkpoint_goal", goal_id=goal_id, current_step="late",
                          progress_pct=10)
    assert lost.is_error and lost.structured_content["code"] == "lease_lost"
    assert lost.content[0].text.startswith("lease_lost (409)")
    # Forgotten: the first worker now holds nothing.
    again = await one.call("heartbeat", goal_id=goal_id)
    assert again.structured_content["code"] == "lease_required"

    # The end of a turn releases the lease; resume_goal takes it again.
    released = await two.ok("checkpoint_goal", goal_id=goal_id, current_step="built",
                            progress_pct=60, release_lease=True)
    assert released["lease_released"] is True
    assert (await two.call("heartbeat", goal_id=goal_id)).structured_content["code"] == \
        "lease_required"
    assert (await two.ok("resume_goal", goal_id=goal_id))["lease"]["generation"] == 3

    # An approval gate blocks the goal and ends the lease.
    blocked = await two.ok("request_approval", goal_id=goal_id, gate="deploy",
                           summary="ship it?")
    assert blocked["status"] == "blocked" and blocked["reason"] == "BLOCKED_APPROVAL"
    finish = await two.call("finish_goal", goal_id=goal_id, status="completed",
                            summary="shipped")
    assert finish.is_error and finish.structured_content["code"] == "lease_required"
    assert not any("wll_" in text for text in one.texts + two.texts)


@pytest.mark.slow  # real processes or many examples: not in make test-quick
def test_start_up_failures_are_clear(live_server, caplog):
    from wakeledger_agent import mcp_server

    assert mcp_server.main({"WAKELEDGER_URL": "", "WAKELEDGER_TOKEN": "wl_x"}) == 2
    assert "WAKELEDGER_URL" in caplog.text
    assert mcp_server.main({"WAKELEDGER_URL": "http://127.0.0.1:9", "WAKELEDGER_TOKEN": "x",
                            "WAKELEDGER_TIMEOUT": "soon"}) == 2
    assert "WAKELEDGER_TIMEOUT" in caplog.text
    assert mcp_server.main({"WAKELEDGER_URL": "http://127.0.0.1:9", "WAKELEDGER_TOKEN": "x"}) == 9
    assert "cannot reach http://127.0.0.1:9/api/v1" in caplog.text

    # A token the server refuses: the process says so on stderr and exits 4,
    # before any protocol traffic (stdout stays empty).
    env = {**os.environ, "WAKELEDGER_URL": live_server.url,
           "WAKELEDGER_TOKEN": "wl_AAAAAAAA_not-a-real-token-at-all"}
    bad = subprocess.run([sys.executable, "-m", "wakeledger_agent.cli", "mcp"], env=env, text=True,
                         capture_output=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert bad.returncode == 4 and "unauthenticated" in bad.stderr
    assert bad.stdout == ""


def test_openapi_schemas_become_self_contained_json_schema():
    components = {
        "LeaseProofRequest": {"type": "object", "description": "a docstring",
                              "properties": {"token": {"type": "string"}},
                              "required": ["token"]},
        "StatusEnum": {"enum": ["a", "b"], "type": "string", "description": "* `a` - a"},
    }
    schema = json_schema({
        "type": "object", "description": "root docstring",
        "properties": {
            "lease": {"allOf": [{"$ref": "#/components/schemas/LeaseProofRequest"}],
                      "nullable": True, "description": "The lease you hold."},
            "status": {"allOf": [{"$ref": "#/components/schemas/StatusEnum"}],
                       "nullable": True},
            "count": {"type": "integer", "nullable": True, "readOnly": True},
            "items": {"type": "array", "items": {"$ref": "#/components/schemas/StatusEnum"}},
            # A field may be called like a keyword: it is a name, not a schema.
            "description": {"type": "string"},
        },
    }, components)
    Draft202012Validator.check_schema(schema)
    lease = schema["properties"]["lease"]
    # The field's help text wins; the component's docstring is dropped.
    assert lease["description"] == "The lease you hold."
    assert lease["type"] == ["object", "null"] and lease["additionalProperties"] is False
    assert schema["properties"]["status"]["enum"] == ["a", "b", None]
    assert schema["properties"]["count"] == {"type": ["integer", "null"]}
    assert schema["properties"]["items"]["items"] == {"enum": ["a", "b"], "type": "string"}
    assert schema["properties"]["description"] == {"type": "string"}
    validator = Draft202012Validator(schema)
    assert validator.is_valid({"lease": None, "status": None, "count": 3})
    assert not validator.is_valid({"lease": {"token": "x"}, "surprise": 1})
