"""/mcp's tasks (api/mcp/tasks.py): hostile task ids and answers are JSON-RPC
errors (never a 500, nothing recorded), one caller's task is nobody else's,
and the 2026-07-28 tasks extension's shapes (resultType "task", ttlMs,
pollIntervalMs, inputRequests, the result inside tasks/get)."""

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.test import RequestFactory
from mcp_types import PROTOCOL_VERSION_META_KEY

from api.mcp import guard, tasks
from ledger.access import accounts
from ledger.models import Event
from ledger.services import hosttasks
from tests.api import test_mcp_http_guard
from tests.helpers import issue_agent_token

pytestmark = pytest.mark.django_db
# The _meta views hands a handler: the served revision, and for a 2026 client
# its per-request capabilities.
SERVED = {PROTOCOL_VERSION_META_KEY: "2026-07-28"}
MODERN_META = {**SERVED, tasks.CLIENT_CAPABILITIES: {"extensions": {tasks.EXTENSION: {}}}}


@pytest.fixture(autouse=True)
def fresh_counters():
    cache.clear()
    yield
    cache.clear()


def operator_token(name: str) -> str:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create(username=name)
    user.groups.add(Group.objects.get_or_create(name="operator")[0])
    return accounts.issue_token(user)


def rpc(client, message: Any, token: str | None = None, **headers: str):
    """A 2025-11-25 request (the handshake revision that has tasks), unless
    the test names another."""
    headers.setdefault("HTTP_MCP_PROTOCOL_VERSION", "2025-11-25")
    return test_mcp_http_guard.rpc(client, message, token, **headers)


def message(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 3, "method": method, "params": params}


def start_task(client, token: str, key: str) -> dict[str, Any]:
    answer = rpc(client, message("tools/call", name="run_goal", task={"ttl": 1000}, arguments={
        "goal_key": key, "workspace": f"/srv/{key}", "objective": "o",
        "done_criteria": ["d"]}), token).json()
    return answer["result"]["task"]


@pytest.mark.parametrize("task_id", [12, None, "", "\ud800", "wlt1." + "A" * 5000,
                                     "wlt1.!!!!", "wlt1." + "A" * 43, ["x"], {"a": 1}])
@pytest.mark.parametrize("method", ["tasks/get", "tasks/result", "tasks/cancel",
                                    "tasks/update"])
def test_a_task_id_that_names_no_task_of_the_caller_is_not_found(client, method, task_id):
    token = issue_agent_token("agent-t")
    before = Event.objects.count()
    answer = rpc(client, message(method, taskId=task_id,
                                 inputResponses={"approval:g": {"action": "accept"}}), token)
    if task_id == "\ud800":  # refused with every lone surrogate, before any method runs
        assert (answer.status_code, answer.json()["error"]["code"]) == (400, -32700)
    else:
        assert answer.status_code == 200
        assert answer.json()["error"] == {"code": -32602,
                                          "message": "Failed to retrieve task: Task not found"}
    assert Event.objects.count() == before


def test_another_agents_task_id_is_not_found_and_its_own_is(client):
    mine, other = issue_agent_token("agent-a"), issue_agent_token("agent-b")
    task = start_task(client, mine, "ta")
    assert task["status"] == "working" and task["ttl"] is None
    theirs = rpc(client, message("tasks/get", taskId=task["taskId"]), other).json()
    assert theirs["error"]["message"] == "Failed to retrieve task: Task not found"
    seen = rpc(client, message("tasks/get", taskId=task["taskId"]), mine).json()["result"]
    assert seen["taskId"] == task["taskId"] and seen["status"] == "working"
    # Not over: tasks/result says to poll, rather than holding a worker.
    early = rpc(client, message("tasks/result", taskId=task["taskId"]), mine).json()
    assert early["error"]["code"] == -32602 and "poll tasks/get" in early["error"]["message"]


@pytest.mark.parametrize("responses", [
    None, [], {}, {"approval:nope": {"action": "accept", "content": {"decision": "approve"}}},
    {"approval:deploy": "yes"}, {"approval:deploy": {"action": "maybe"}},
    {"approval:deploy": {"action": "accept", "content": {"decision": "sure"}}},
    {"approval:deploy": {"action": "accept", "content": {"decision": "approve", "note": 5}}},
])
def test_a_bad_answer_to_an_approval_is_refused_and_decides_nothing(client, responses):
    agent, ops = issue_agent_token("agent-u"), operator_token("ops-u")
    task = start_task(client, agent, "tu")
    goal_id = hosttasks.goal_of(f"{accounts.ApiToken.objects.first().user.pk}:agent-u",
                                task["taskId"])
    rpc(client, message("tools/call", name="request_approval", arguments={
        "goal_id": goal_id, "gate": "deploy", "summary": "ship?"}), agent)
    followed = rpc(client, message("tools/call", name="await_goal", task={},
                                   arguments={"goal_id": goal_id}), ops).json()["result"]["task"]
    assert followed["status"] == "input_required"
    before = Event.objects.count()
    answer = rpc(client, message("tasks/update", taskId=followed["taskId"],
                                 inputResponses=responses), ops).json()
    assert answer["error"]["code"] == -32602, answer
    assert Event.objects.count() == before


def modern_request(token: str):
    request = RequestFactory().post("/mcp", HTTP_MCP_PROTOCOL_VERSION="2026-07-28",
                                    HTTP_AUTHORIZATION=f"Bearer {token}")
    principal, refused = guard.authenticate(request)
    assert refused is None
    return request, principal


def test_the_2026_tasks_extension_shapes(client):
    agent, ops = issue_agent_token("agent-m"), operator_token("ops-m")
    request, principal = modern_request(agent)
    assert tasks.wants_task("run_goal", {}, MODERN_META)
    assert not tasks.wants_task("get_goal", {}, MODERN_META)
    assert not tasks.wants_task("run_goal", {}, {})
    created = tasks.create(request, principal, "run_goal", {
        "goal_key": "m", "workspace": "/srv/m", "objective": "o", "done_criteria": ["d"]},
        {}, MODERN_META)
    assert created["resultType"] == "task" and created["status"] == "working"
    assert created["ttlMs"] is None and created["pollIntervalMs"] == 15_000
    assert "ttl" not in created and "pollInterval" not in created
    got = tasks.get(request, principal, {"taskId": created["taskId"]}, SERVED)
    assert got["resultType"] == "complete" and got["status"] == "working"
    goal_id = hosttasks.goal_of(tasks.subject(principal), created["taskId"])
    rpc(client, message("tools/call", name="request_approval", arguments={
        "goal_id": goal_id, "gate": "deploy", "summary": "ship?"}), agent)
    waiting = tasks.get(request, principal, {"taskId": created["taskId"]}, SERVED)
    assert waiting["status"] == "input_required"
    form = waiting["inputRequests"]["approval:deploy"]
    assert form["method"] == "elicitation/create" and form["params"]["mode"] == "form"
    assert form["params"]["requestedSchema"]["properties"]["decision"]["enum"] == [
        "approve", "reject"]
    ops_request, ops_principal = modern_request(ops)
    ops_task = tasks.create(ops_request, ops_principal, "await_goal", {"goal_id": goal_id},
                            {}, MODERN_META)
    assert tasks.update(ops_request, ops_principal, {
        "taskId": ops_task["taskId"], "inputResponses": {"approval:deploy": {
            "action": "accept", "content": {"decision": "approve", "note": "go"}}}},
        SERVED) == {"resultType": "complete"}
    resolved = Event.objects.get(goal_id=goal_id, kind="approval.resolved")
    assert (resolved.actor, resolved.data["operator"], resolved.data["decision"]) == (
        "ops-m", "ops-m", "approve")
    assert tasks.get(request, principal, {"taskId": created["taskId"]}, SERVED)["status"] == \
        "working"
    assert tasks.cancel(ops_request, ops_principal, {"taskId": ops_task["taskId"]}, SERVED) == {
        "resultType": "complete"}
    over = tasks.get(request, principal, {"taskId": created["taskId"]}, SERVED)
    assert over["status"] == "cancelled" and "pollIntervalMs" not in over
    assert over["result"]["isError"] is True
    assert over["result"]["structuredContent"]["event"]["kind"] == "goal.stopped"
    with pytest.raises(tasks.RpcFault, match="already in terminal status"):
        tasks.cancel(ops_request, ops_principal, {"taskId": ops_task["taskId"]}, SERVED)
    assert created["taskId"] not in json.dumps(list(Event.objects.values_list("data",
                                                                              flat=True)))


def test_the_model_is_told_the_goal_at_once_and_other_tools_do_not_run_as_tasks(client):
    token = issue_agent_token("agent-i")
    answer = rpc(client, message("tools/call", name="run_goal", task={}, arguments={
        "goal_key": "i", "workspace": "/srv/i", "objective": "o"}), token).json()["result"]
    told = answer["_meta"][tasks.IMMEDIATE]
    goal_id = hosttasks.goal_of(f"{accounts.ApiToken.objects.first().user.pk}:agent-i",
                                answer["task"]["taskId"])
    assert json.loads(told.splitlines()[0])["goal"]["id"] == goal_id
    assert "wll_" not in told  # the lease token stays with the server
    before = Event.objects.count()
    refused = rpc(client, message("tools/call", name="checkpoint_goal", task={}, arguments={
        "goal_id": goal_id, "current_step": "x", "progress_pct": 5}), token).json()
    assert refused["error"]["code"] == -32601
    malformed = rpc(client, message("tools/call", name="run_goal", task=5, arguments={}),
                    token).json()
    assert malformed["error"]["code"] == -32602
    assert Event.objects.count() == before
