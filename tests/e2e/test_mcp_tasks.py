"""A goal followed as an MCP task (api/mcp/tasks.py) by the MCP SDK's own
client against a real gunicorn server that is restarted in between: from a
task-augmented run_goal, through a pause to a rate limit's reset and an
approval answered through an operator's task, to the completion with its
evidence and log index; a cancel through the task; nobody else's tasks."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import _types as wire

from tests.e2e.test_deploy import environment, free_port, wait_until_serving
from tests.e2e.test_mcp_http import post

ROOT = Path(__file__).resolve().parents[2]
PROVIDER_TEXT = "HTTP 429 Too Many Requests: rate limit exceeded (upstream-secret-words)"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")),
                       reason="runs once, in the SQLite half (it brings its own var/)"),
]


class Server:
    """One gunicorn (sync workers, as the Procfile runs it) on a fixed port,
    which the test stops and starts again."""

    def __init__(self, env: dict[str, str]):
        self.env, self.port = env, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "python:ledger.project.gunicorn_conf",
             "ledger.project.wsgi", "--bind", f"127.0.0.1:{self.port}", "--workers", "1"],
            cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        wait_until_serving(self.url, self.process)

    def stop(self) -> None:
        if self.process is None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=20)
        self.process = None


def manage(env: dict[str, str], code: str) -> str:
    setup = "import django; django.setup(); from django.core.management import call_command; "
    return subprocess.run([sys.executable, "-c", setup + code], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True, timeout=180).stdout


def client(url: str, token: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    return Client(streamable_http_client(url, http_client=http), mode="legacy")


class Host:
    """What a host that follows tasks does with the SDK's client: a
    task-augmented tools/call, then tasks/get, tasks/result, tasks/update,
    tasks/cancel (the SDK has the 2025-11-25 types, not the verbs)."""

    def __init__(self, connected: Client):
        self.client = connected

    async def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        result = await self.client.call_tool(name, arguments)
        assert not result.is_error, (name, result.content)
        return result.structured_content

    async def start_task(self, name: str, **arguments: Any) -> wire.Task:
        params = wire.CallToolRequestParams(name=name, arguments=arguments,
                                            task=wire.TaskMetadata(ttl=86_400_000))
        # The SDK's send_request checks a tools/call answer as a CallToolResult
        # (2.3.0 sends no task-augmented call itself), so this one request goes
        # through its dispatcher, on the same connection, and is parsed with
        # the SDK's own CreateTaskResult.
        raw = await self.client.session._dispatcher.send_raw_request(
            "tools/call", params.model_dump(mode="json", by_alias=True, exclude_none=True), {})
        return wire.CreateTaskResult.model_validate(raw, by_name=False).task

    async def get(self, task_id: str) -> wire.GetTaskResult:
        return await self.client.session.send_request(
            wire.GetTaskRequest(params=wire.GetTaskRequestParams(task_id=task_id)),
            wire.GetTaskResult)

    async def result(self, task_id: str) -> wire.CallToolResult:
        return await self.client.session.send_request(
            wire.GetTaskPayloadRequest(params=wire.GetTaskPayloadRequestParams(task_id=task_id)),
            wire.CallToolResult)

    async def cancel(self, task_id: str) -> wire.CancelTaskResult:
        return await self.client.session.send_request(
            wire.CancelTaskRequest(params=wire.CancelTaskRequestParams(task_id=task_id)),
            wire.CancelTaskResult)


def update(url: str, token: str, task_id: str, responses: dict[str, Any]) -> dict[str, Any]:
    """tasks/update (the tasks extension's verb; the SDK has no type for it)."""
    _status, _headers, body = post(url, {
        "jsonrpc": "2.0", "id": 7, "method": "tasks/update",
        "params": {"taskId": task_id, "inputResponses": responses}},
        {"Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-11-25"})
    return body


def test_a_host_follows_a_goal_as_a_task_across_a_restart_to_its_verified_end(tmp_path):
    env = environment(tmp_path / "var", PYTHONPATH=str(ROOT),
                      SECRET_KEY="mcp-tasks-" + "k" * 50)
    out = manage(env, "call_command('migrate', interactive=False, verbosity=0); "
                      "call_command('ledger', 'agent', 'create', 'task-agent'); "
                      "call_command('ledger', 'agent', 'create', 'other-agent'); "
                      "call_command('ledger', 'agent', 'create', 'ops', role='operator')")
    agent, other, operator = [line.strip() for line in out.splitlines()
                              if line.startswith("wl_")]
    server = Server(env)
    url = f"{server.url}/mcp"
    seen: dict[str, Any] = {}
    try:
        server.start()

        async def before_restart() -> None:
            async with client(url, agent) as connected:
                host = Host(connected)
                listed = {t.name: t for t in (await connected.list_tools()).tools}
                assert listed["run_goal"].execution.task_support == "optional"
                assert listed["await_goal"].execution.task_support == "optional"
                assert listed["checkpoint_goal"].execution is None
                assert connected.server_capabilities.tasks.requests.tools.call is not None
                task = await host.start_task(
                    "run_goal", goal_key="tasked", workspace="/srv/tasked", objective="o",
                    done_criteria=["shipped"], next_actions=["ship"])
                assert task.status == "working" and task.task_id.startswith("wlt1.")
                assert task.ttl is None and task.poll_interval == 15_000
                seen["task"] = task.task_id
                goals = await host.tool("get_goal", goal_id=hosttask_goal(seen["task"]))
                seen["goal"] = goals["id"]
                # The agent's host hits a rate limit three hours long: the task
                # keeps working, polled at the bound, in our words only.
                await host.tool("report_run", goal_id=seen["goal"], outcome="error",
                                error_text=PROVIDER_TEXT, retry_after="10800")
                paused = await host.get(seen["task"])
                assert paused.status == "working" and paused.poll_interval == 600_000
                assert "rate limit" in paused.status_message
                assert "upstream" not in paused.status_message

        anyio.run(before_restart)
        server.stop()
        server.start()  # ours restarts; the host's client is a new one too

        async def after_restart() -> None:
            async with client(url, agent) as connected:
                host = Host(connected)
                paused = await host.get(seen["task"])
                assert paused.status == "working" and "Paused" in paused.status_message
            # Another agent's call names no task of theirs.
            async with client(url, other) as connected:
                with pytest.raises(MCPError, match="Task not found"):
                    await Host(connected).get(seen["task"])

        anyio.run(after_restart)
        # An operator wakes it early (REST, as the dashboard does); the agent
        # takes it and asks for an approval.
        status, _h, woke = post(f"{server.url}/api/v1/goals/{seen['goal']}/wake",
                                {"reason": "the reset came early"},
                                {"Authorization": f"Bearer {operator}"})
        assert status == 200, woke

        async def approval() -> None:
            async with client(url, agent) as connected:
                host = Host(connected)
                assert (await host.tool("resume_goal", goal_id=seen["goal"]))["acquired"]
                await host.tool("request_approval", goal_id=seen["goal"], gate="deploy",
                                summary="ship it?")
                waiting = await host.get(seen["task"])
                assert waiting.status == "input_required" and "'deploy'" in waiting.status_message
            # The agent may not decide its own gate through its task.
            refused = update(url, agent, seen["task"], {
                "approval:deploy": {"action": "accept", "content": {"decision": "approve"}}})
            assert refused["error"]["message"].startswith("forbidden"), refused
            async with client(url, operator) as connected:
                host = Host(connected)
                # The agent's task id is not the operator's: bound to who asks.
                with pytest.raises(MCPError, match="Task not found"):
                    await host.get(seen["task"])
                task = await host.start_task("await_goal", goal_id=seen["goal"])
                assert task.status == "input_required" and task.task_id != seen["task"]
                seen["ops_task"] = task.task_id
            answered = update(url, operator, seen["ops_task"], {
                "approval:deploy": {"action": "accept",
                                    "content": {"decision": "approve", "note": "go"}}})
            assert answered["result"] == {}, answered
            async with client(url, agent) as connected:
                host = Host(connected)
                again = await host.get(seen["task"])
                assert again.status == "working"
                assert (await host.tool("resume_goal", goal_id=seen["goal"]))["acquired"]
                await host.tool("finish_goal", goal_id=seen["goal"], status="completed",
                                summary="shipped", evidence=[
                                    {"criterion": "shipped", "evidence": "release v1 tagged"}])

        anyio.run(approval)
        manage(env, "call_command('ledger', 'seal')")

        async def completion() -> None:
            async with client(url, agent) as connected:
                host = Host(connected)
                done = await host.get(seen["task"])
                assert done.status == "completed" and done.poll_interval is None
                final = await host.result(seen["task"])
                assert not final.is_error
                answer = final.structured_content
                assert answer["evidence"] == [{"criterion": "shipped",
                                               "evidence": "release v1 tagged"}]
                assert answer["event"]["kind"] == "goal.completed"
                assert isinstance(answer["event"]["log_index"], int)
                # A second goal, cancelled through the operator's task.
                second = await host.start_task(
                    "run_goal", goal_key="tasked-2", workspace="/srv/tasked-2", objective="o")
                seen["second"] = second.task_id
                with pytest.raises(MCPError, match="forbidden"):
                    await host.cancel(second.task_id)  # an agent may not stop a goal
            async with client(url, operator) as connected:
                host = Host(connected)
                mine = await host.result(seen["ops_task"])
                assert mine.structured_content["status"] == "done"
                followed = await host.start_task("await_goal",
                                                 goal_id=hosttask_goal(seen["second"]))
                cancelled = await host.cancel(followed.task_id)
                assert cancelled.status == "cancelled"
            async with client(url, agent) as connected:
                assert (await Host(connected).get(seen["second"])).status == "cancelled"

        anyio.run(completion)
    finally:
        server.stop()
    events = manage(env, (
        "from ledger.models import Event; import json; "
        "print(json.dumps([[e.kind, e.actor, e.data] for e in Event.objects.order_by('id')]))"))
    recorded = json.loads(events.strip().splitlines()[-1])
    resolved = [e for e in recorded if e[0] == "approval.resolved"]
    assert [(e[1], e[2]["operator"], e[2]["decision"]) for e in resolved] == [
        ("ops", "ops", "approve")]
    stopped = [e for e in recorded if e[0] == "goal.stopped"]
    assert [(e[2]["operator"], e[2]["reason"]) for e in stopped] == [
        ("ops", "cancelled through its MCP task (tasks/cancel)")]
    stored = json.dumps(recorded)
    assert seen["task"] not in stored and seen["ops_task"] not in stored
    assert "upstream-secret-words" not in stored


def hosttask_goal(task_id: str) -> str:
    """The goal a task id names (the id is the goal's UUID and a MAC)."""
    import base64
    import uuid

    body = task_id.removeprefix("wlt1.")
    return str(uuid.UUID(bytes=base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))[:16]))
