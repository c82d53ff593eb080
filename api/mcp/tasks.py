"""``/mcp``'s tasks: a host follows a goal as an MCP task — 2025-11-25's
experimental tasks (``task`` on ``tools/call``, ``tasks/get``,
``tasks/result``, ``tasks/cancel``) and the 2026-07-28 tasks extension
(``io.modelcontextprotocol/tasks``: a task handle with ``resultType:
"task"``, ``tasks/get`` carrying the input requests or the result,
``tasks/update``, ``tasks/cancel``).

This layer parses and presents. The task id and what the task shows are
``ledger.services.hosttasks`` (the status is the pure
``ledger.domain.hosttasks.task_view``); an approval answered through a task
and a task's cancel are the REST API's own views, called in-process as the
caller (``InProcessApi``), so the same roles decide (only an operator may
approve or stop), and the act is recorded as REST records it, with the
caller's name.

Stateless, like the rest of ``/mcp``: nothing about a task is kept; its id
is derived again on every call, so a task survives the client's restart and
ours. With no server stream (JSON response mode), no
``notifications/tasks/status`` is sent: a host polls at the interval we
suggest (docs/agents.md, "Following a goal as a task").
"""

import json
import urllib.parse
from collections.abc import Callable
from typing import Any

import mcp.types as types
from django.http import HttpRequest
from mcp.shared.exceptions import MCPError

from api.mcp.eras import modern
from api.mcp.inprocess import DatabaseLeases, InProcessApi, Principal
from ledger.access.accounts import AGENT, role_of
from ledger.services import hosttasks
from ledger.services.caller import Caller, GoalNotFound
from wakeledger_agent.client import ApiError
from wakeledger_agent.mcp_calls import ToolCalls

EXTENSION = "io.modelcontextprotocol/tasks"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
RELATED_TASK = "io.modelcontextprotocol/related-task"
# What a host hands its model at once while the task runs (2025-11-25).
IMMEDIATE = "io.modelcontextprotocol/model-immediate-response"
# The tools whose call can become a task: the ones that start or await a goal.
TASK_TOOLS = ("run_goal", "await_goal")
METHOD_NOT_FOUND, INVALID_REQUEST, INVALID_PARAMS = -32601, -32600, -32602
APPROVAL = "approval:"  # an input request's key: approval:<gate>

SERVER_CAPABILITY = types.ServerTasksCapability(
    cancel=types.TasksCancelCapability(),
    requests=types.ServerTasksRequestsCapability(
        tools=types.TasksToolsCapability(call=types.TasksCallCapability())))


class RpcFault(MCPError):
    """A JSON-RPC error the view answers (``rpc_error``): the SDK's own error
    type (code, message, data), which a method table's dispatch catches."""


def dumped(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def task_dumped(model: Any) -> dict[str, Any]:
    """A Task (or a result that is one) dumped: ``ttl`` stays, as null — the
    schema requires it (null: unlimited), and exclude_none would drop it."""
    fields = dumped(model)
    fields.setdefault("ttl", None)
    return fields


def subject(principal: Principal) -> str:
    """Whom a task id is bound to: the caller's account (any of its tokens)."""
    return f"{principal.user.pk}:{principal.user.get_username()}"


def caller_of(principal: Principal) -> Caller:
    """Who reads, as the REST API sees it: an agent only its own goals."""
    name = principal.user.get_username()
    return Caller(name, owner=name if role_of(principal.user) == AGENT else None)


def wants_task(name: object, params: dict[str, Any], meta: dict[str, Any]) -> bool:
    """A task-augmented call of a tool that can run as one: 2025-11-25's ``task``
    param, or 2026-07-28's per-request capabilities naming the extension. A
    ``task`` param on any other tool is refused, as 2025-11-25 asks (-32601);
    a 2026 client names the extension on every call, so there the other
    tools simply answer."""
    if params.get("task") is not None:  # "task": null is no task
        if not isinstance(params["task"], dict):
            raise RpcFault(INVALID_PARAMS, "task must be an object ({\"ttl\": ms}).")
        if name not in TASK_TOOLS:
            raise RpcFault(METHOD_NOT_FOUND, f"Tool {str(name)[:80]!r} does not run as a "
                           f"task; {' and '.join(TASK_TOOLS)} do.")
        return True
    if name not in TASK_TOOLS:
        return False
    capabilities = meta.get(CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and EXTENSION in extensions


def advertised(tool: types.Tool) -> types.Tool:
    """The tool as tools/list shows it: the ones that can run as a task say so."""
    if tool.name not in TASK_TOOLS:
        return tool
    return tool.model_copy(update={"execution": types.ToolExecution(task_support="optional")})


# --------------------------------------------------------------------------- presenting

def task_fields(meta: dict[str, Any], principal: Principal,
                followed: hosttasks.Followed) -> dict[str, Any]:
    """The Task object in the call's era (2025: ``ttl``, ``pollInterval``;
    2026-07-28: ``ttlMs``, ``pollIntervalMs``). ttl null: a task lasts as
    long as the goal is kept."""
    view = followed.view
    poll = view.poll_seconds * 1000 if view.poll_seconds is not None else None
    task = types.Task(task_id=hosttasks.task_id(subject(principal), followed.goal_id),
                      status=view.status, status_message=view.message,  # type: ignore[arg-type]
                      created_at=followed.created_at(), last_updated_at=followed.updated_at(),
                      ttl=None, poll_interval=poll)
    fields = task_dumped(task)
    if modern(meta):
        fields["ttlMs"] = fields.pop("ttl")
        if "pollInterval" in fields:
            fields["pollIntervalMs"] = fields.pop("pollInterval")
    return fields


def outcome_result(principal: Principal, followed: hosttasks.Followed) -> types.CallToolResult:
    """A terminal task's result: what the tool call finally answers."""
    answer = followed.outcome()
    related = {RELATED_TASK: {"taskId": hosttasks.task_id(subject(principal),
                                                          followed.goal_id)}}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(answer))],
        structured_content=answer, is_error=followed.view.is_error or
        followed.view.status == "cancelled", _meta=related)  # type: ignore[call-arg]


def input_requests(followed: hosttasks.Followed) -> dict[str, Any]:
    """The approvals a task waits for, as form elicitations (2026-07-28's
    ``inputRequests``), answered with ``tasks/update``."""
    schema = {"type": "object", "properties": {
        "decision": {"type": "string", "enum": ["approve", "reject"],
                     "title": "Approve or reject"},
        "note": {"type": "string", "title": "Note (recorded with your name)"}},
        "required": ["decision"]}
    return {f"{APPROVAL}{gate}": dumped(types.ElicitRequest(params=types.ElicitRequestFormParams(
        message=f"Goal {followed.goal_id} waits for a decision on gate '{gate}'. Only a "
                "person allowed to approve (an operator) can decide it.",
        requested_schema=schema)))  # type: ignore[arg-type]
        for gate in followed.view.gates}


def detailed(meta: dict[str, Any], principal: Principal,
             followed: hosttasks.Followed) -> dict[str, Any]:
    """tasks/get's answer."""
    fields = task_fields(meta, principal, followed)
    if not modern(meta):
        return task_dumped(types.GetTaskResult(**fields))
    fields["resultType"] = "complete"
    if followed.view.status == "input_required":
        fields["inputRequests"] = input_requests(followed)
    elif followed.view.terminal:
        fields["result"] = dumped(outcome_result(principal, followed))
    return fields


# --------------------------------------------------------------------------- handlers

def followed_task(principal: Principal, params: dict[str, Any]) -> hosttasks.Followed:
    """The task ``params.taskId`` names for this caller (an unknown, forged or
    another caller's id, and a goal it may not see, are all "not found")."""
    goal_id = hosttasks.goal_of(subject(principal), params.get("taskId"))
    if goal_id is None:
        raise RpcFault(INVALID_PARAMS, "Failed to retrieve task: Task not found")
    try:
        return hosttasks.follow(caller_of(principal), goal_id)
    except GoalNotFound:
        raise RpcFault(INVALID_PARAMS, "Failed to retrieve task: Task not found") from None


def create(request: HttpRequest, principal: Principal, name: str, arguments: dict[str, Any],
           params: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """A task-augmented tools/call: the tool runs as always (run_goal starts
    the goal and this server keeps its lease); the answer is the task that
    follows the goal. A call that fails answers its error result (no task)."""
    api = InProcessApi(request, principal)
    result = ToolCalls(api, DatabaseLeases(principal, api)).call(name, arguments)
    answer = result.structured_content or {}
    goal = answer.get("goal") if name == "run_goal" else answer
    if result.is_error or not isinstance(goal, dict) or "id" not in goal:
        return dumped(result)
    followed = hosttasks.follow(caller_of(principal), str(goal["id"]))
    fields = task_fields(meta, principal, followed)
    # The tool's own answer (the goal's id, the lease this server keeps, the
    # notes), which the model needs now to work on the goal, not at its end.
    told = {IMMEDIATE: "\n".join(block.text for block in result.content
                                  if isinstance(block, types.TextContent))}
    if modern(meta):
        return {**fields, "resultType": "task", "_meta": told}
    return {**dumped(types.CreateTaskResult(task=types.Task(**fields))),
            "task": task_dumped(types.Task(**fields)), "_meta": told}


def get(request: HttpRequest, principal: Principal, params: dict[str, Any],
        meta: dict[str, Any]) -> dict[str, Any]:
    return detailed(meta, principal, followed_task(principal, params))


def result(request: HttpRequest, principal: Principal, params: dict[str, Any],
           meta: dict[str, Any]) -> dict[str, Any]:
    """2025-11-25's tasks/result: the tool call's final answer. Our workers
    answer one request at a time and a goal can last days, so a task not yet
    over is refused rather than held open: poll tasks/get until it is."""
    followed = followed_task(principal, params)
    if not followed.view.terminal:
        raise RpcFault(INVALID_PARAMS, f"Task not finished ({followed.view.status}): poll "
                       "tasks/get until its status is terminal, then ask again.")
    return dumped(outcome_result(principal, followed))


def _act(request: HttpRequest, principal: Principal, path: str, body: dict[str, Any]) -> None:
    """One act through the REST view, as the caller (its roles, its record)."""
    try:
        InProcessApi(request, principal).call("POST", path, body)
    except ApiError as error:
        problem = error.problem
        raise RpcFault(INVALID_REQUEST if problem.get("status") in (401, 403) else
                       INVALID_PARAMS, f"{problem.get('code')}: {problem.get('detail', '')}",
                       problem) from None


def cancel(request: HttpRequest, principal: Principal, params: dict[str, Any],
           meta: dict[str, Any]) -> dict[str, Any]:
    """tasks/cancel: the goal is stopped, as an operator stops it (only an
    operator may; recorded with the caller's name and a reason that says it
    came through the task)."""
    followed = followed_task(principal, params)
    if followed.view.terminal:
        raise RpcFault(INVALID_PARAMS, "Cannot cancel task: already in terminal status "
                       f"'{followed.view.status}'")
    _act(request, principal, f"goals/{followed.goal_id}/stop", {"reason": hosttasks.CANCEL_REASON})
    if modern(meta):
        return {"resultType": "complete"}
    after = hosttasks.follow(caller_of(principal), followed.goal_id)
    return task_dumped(types.CancelTaskResult(**task_fields(meta, principal, after)))


def update(request: HttpRequest, principal: Principal, params: dict[str, Any],
           meta: dict[str, Any]) -> dict[str, Any]:
    """tasks/update: the answers to a task's approvals. Each accepted form
    decides its gate through the REST approval (operators only, recorded with
    the caller's name); a declined or cancelled form decides nothing."""
    followed = followed_task(principal, params)
    responses = params.get("inputResponses")
    if not isinstance(responses, dict) or not responses:
        raise RpcFault(INVALID_PARAMS, "tasks/update needs inputResponses: an object keyed "
                       "by the task's inputRequests keys.")
    decisions: list[tuple[str, str, str]] = []
    for key, response in responses.items():
        gate = key[len(APPROVAL):] if isinstance(key, str) and key.startswith(APPROVAL) else None
        if gate is None or gate not in followed.view.gates:
            raise RpcFault(INVALID_PARAMS, f"No input request {str(key)[:80]!r} is open on "
                           "this task.")
        if not isinstance(response, dict) or response.get("action") not in (
                "accept", "decline", "cancel"):
            raise RpcFault(INVALID_PARAMS, f"{key}: an elicitation result (action accept, "
                           "decline or cancel) is expected.")
        if response["action"] != "accept":
            continue
        content = response.get("content") if isinstance(response.get("content"), dict) else {}
        decision, note = content.get("decision"), content.get("note", "")
        if decision not in ("approve", "reject") or not isinstance(note, str):
            raise RpcFault(INVALID_PARAMS, f"{key}: content.decision must be approve or "
                           "reject (content.note a string).")
        decisions.append((gate, decision, note))
    for gate, decision, note in decisions:
        quoted = urllib.parse.quote(gate, safe="")
        _act(request, principal, f"goals/{followed.goal_id}/approvals/{quoted}/resolve",
             {"decision": decision, "note": note})
    return {"resultType": "complete"} if modern(meta) else {}


Handler = Callable[[HttpRequest, Principal, dict[str, Any], dict[str, Any]], dict[str, Any]]
METHODS: dict[str, Handler] = {
    "tasks/get": get,
    "tasks/result": result,
    "tasks/cancel": cancel,
    "tasks/update": update,
}
