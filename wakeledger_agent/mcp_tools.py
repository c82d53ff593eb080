"""The MCP server's tools: which API call each one makes, and its description
and input schema, taken from the API's own OpenAPI document at start-up (so
the API, not the SDK, stays the one validator of the arguments).
"""

import re
from dataclasses import dataclass
from typing import Any

import mcp.types as types

CHOICE_LIST = re.compile(r"(\n\n)?(\* `[^`]*` - [^\n]*\n?)+$")


@dataclass(frozen=True)
class Spec:
    """One tool: the API call it makes and what it adds to the API's words."""

    method: str
    path: str  # relative to the API's base, e.g. "goals/{goal_id}/runs"
    fenced: bool = False  # this server adds the lease it holds
    read_only: bool = False
    note: str = ""


SPECS: dict[str, Spec] = {
    "run_goal": Spec(
        "POST", "goals",
        note="This server keeps the lease token for the goal's later calls; the answer "
             "never shows it."),
    "checkpoint_goal": Spec(
        "POST", "goals/{goal_id}/checkpoints", fenced=True,
        note="Set release_lease on the last checkpoint before your turn ends."),
    "heartbeat": Spec("POST", "goals/{goal_id}/lease/heartbeat", fenced=True,
                      note="Call it at least every lease_seconds / 2 while you work."),
    "report_run": Spec(
        "POST", "goals/{goal_id}/runs", fenced=True,
        note="A rate limit releases the lease: stop working, a wake resumes the goal."),
    "request_approval": Spec("POST", "goals/{goal_id}/approvals", fenced=True),
    "track_job": Spec("POST", "goals/{goal_id}/jobs", fenced=True),
    "update_job": Spec("POST", "goals/{goal_id}/jobs/{job_id}/status", fenced=True),
    "prepare_scheduled_continuation": Spec(
        "POST", "goals/{goal_id}/watchdog", fenced=True,
        note="With policy.scheduler host, create the answer's host_schedule in your host, "
             "then call record_watchdog_receipt."),
    "claim_scheduled_continuation": Spec(
        "POST", "goals/{goal_id}/claim",
        note="Call it first in a host-fired turn and work only when the outcome is "
             "recurring_acquired; this server then keeps the new lease."),
    "cancel_scheduled_continuation": Spec("DELETE", "goals/{goal_id}/watchdog", fenced=True),
    "record_watchdog_receipt": Spec("POST", "goals/{goal_id}/watchdog/receipts", fenced=True),
    "finish_goal": Spec("POST", "goals/{goal_id}/finish", fenced=True),
    "get_goal": Spec("GET", "goals/{goal_id}", read_only=True),
    "get_scheduled_continuation": Spec(
        "GET", "goals/{goal_id}", read_only=True,
        note="Answers the goal's watchdog (its one recurring wake, with its health), the "
             "one-off wake at a rate limit's reset, the last wake and the pause, taken from "
             "that state."),
    "await_goal": Spec(
        "GET", "goals/{goal_id}", read_only=True,
        note="Follows a goal someone else works on: called as a task (a client that "
             "declares task support), the task lasts until the goal ends, asks its approvals "
             "and answers its completion with evidence; called plainly, it answers as get_goal."),
    "resume_goal": Spec(
        "POST", "goals/{goal_id}/lease",
        note="Then reads the resume packet: verify its artifacts_to_verify before you go "
             "on. This server keeps the lease token."),
}
RESUME_PATH = "goals/{goal_id}/resume"
# What get_scheduled_continuation keeps of the goal's state.
WAKE_FIELDS = ("id", "status", "reason", "paused_until", "watchdog", "reset_wake", "last_wake",
               "continuations_used", "retry_count", "policy")
PATH_PARAMS = {
    "goal_id": "The goal's id: goal.id in run_goal's answer.",
    "job_id": "The job's id: job.job_id in track_job's answer.",
}



def json_schema(node: Any, components: dict[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """An OpenAPI 3.0 schema as self-contained JSON Schema 2020-12 (MCP's dialect):
    references inlined, ``nullable`` as a ``null`` type, strict objects closed."""
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in seen:
            raise ValueError(f"recursive schema {name}")
        # A component's description is its serializer's docstring, not the
        # field's help text (which sits beside the reference).
        target = {k: v for k, v in components[name].items() if k != "description"}
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return json_schema({**target, **rest}, components, (*seen, name))
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("nullable", "readOnly", "writeOnly"):
            continue
        if key == "properties":
            out[key] = {name: json_schema(v, components, seen) for name, v in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = json_schema(value, components, seen)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [json_schema(v, components, seen) for v in value]
        else:
            out[key] = value
    if len(out.get("allOf", ())) == 1:  # drf-spectacular's wrapper for a described $ref
        out = {**out.pop("allOf")[0], **out}
    if "enum" in out and isinstance(out.get("description"), str):
        # drf-spectacular appends "* `a` - a" per choice: the enum says it already.
        out["description"] = CHOICE_LIST.sub("", out["description"])
        if not out["description"]:
            del out["description"]
    if node.get("nullable"):
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        elif "type" not in out:
            out = {"anyOf": [out, {"type": "null"}]}
    if out.get("type") == "object" and "properties" in out:
        # Every request serializer is strict: an unknown field is a 400.
        out.setdefault("additionalProperties", False)
    return out


def find_operation(openapi: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    suffix = "/" + path
    for key, operations in openapi.get("paths", {}).items():
        if key.endswith(suffix) and method.lower() in operations:
            return operations[method.lower()]
    raise LookupError(f"the API's OpenAPI document has no {method} {path}")


def describe(operation: dict[str, Any], note: str = "") -> str:
    parts = [operation.get("summary", "").rstrip(".") + ".", operation.get("description", ""),
             note]
    return " ".join(part.strip() for part in parts if part.strip())


def input_schema(spec: Spec, operation: dict[str, Any],
                 components: dict[str, Any]) -> dict[str, Any]:
    body = (operation.get("requestBody", {}).get("content", {})
            .get("application/json", {}).get("schema"))
    schema = json_schema(body, components) if body else {"type": "object", "properties": {}}
    properties = dict(schema.get("properties", {}))
    required = [name for name in schema.get("required", []) if name != "lease"]
    properties.pop("lease", None)  # this server adds it
    described = {p["name"]: p.get("description", "") for p in operation.get("parameters", [])
                 if p.get("in") == "path"}
    params = [name for name in PATH_PARAMS if "{" + name + "}" in spec.path]
    for name in reversed(params):
        properties = {name: {"type": "string", "minLength": 1,
                             "description": described.get(name) or PATH_PARAMS[name]},
                      **properties}
        required.insert(0, name)
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


def build_tools(openapi: dict[str, Any]) -> list[types.Tool]:
    components = openapi.get("components", {}).get("schemas", {})
    tools = []
    for name, spec in SPECS.items():
        operation = find_operation(openapi, spec.method, spec.path)
        description = describe(operation, spec.note)
        if name == "resume_goal":
            resume = find_operation(openapi, "GET", RESUME_PATH)
            description = f"{description} Resume packet: {describe(resume)}"
        tools.append(types.Tool(
            name=name, description=description,
            input_schema=input_schema(spec, operation, components),
            annotations=types.ToolAnnotations(
                read_only_hint=spec.read_only, destructive_hint=False,
                idempotent_hint=spec.read_only or spec.method == "DELETE",
                open_world_hint=False)))
    return tools
