"""The REST API's own views, called in-process for a ``/mcp`` tool call, and
the lease store ``/mcp`` keeps in the database.

Why the views and not the services one by one: a tool is defined as an API
operation (its schema is the operation's, from the API's OpenAPI document),
so calling the operation's view gives, by construction, the same parsing,
strict validation, roles, agent isolation (the caller resolved from the
token; an agent sees only its own goals), idempotency records and problem
codes as REST — the views parse, call one service and present. No HTTP is
involved: the request is built in memory and handed to the view the URL
resolves to, with the caller already authenticated (DRF's forced
authentication), so an OAuth caller needs no API token.
"""

import io
import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.handlers.wsgi import WSGIRequest
from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.urls import resolve, reverse

from api.idempotency import key_digest
from ledger.access.models import McpLease
from ledger.services import tokens
from wakeledger_agent.client import ApiError
from wakeledger_agent.errors import EXIT_USAGE
from wakeledger_agent.mcp_calls import instructions
from wakeledger_agent.mcp_tools import build_tools

# What an in-process request keeps of the outer one: where it came to (the
# answers' links), through which proxy, and from which address.
_KEPT = ("HTTP_HOST", "SERVER_NAME", "SERVER_PORT", "REMOTE_ADDR", "HTTP_X_FORWARDED_FOR",
         "HTTP_X_FORWARDED_PROTO", "HTTP_X_FORWARDED_HOST", "wsgi.url_scheme")


@dataclass(frozen=True)
class Principal:
    """Who calls ``/mcp``: the user the API sees, the credential object DRF
    gets as ``request.auth``, and the holder its leases are kept under."""

    user: AbstractBaseUser
    auth: Any
    holder: str


def api_base() -> str:
    return reverse("api:health").rsplit("/", 1)[0]  # "/api/v1"


class InProcessApi:
    """``request(method, path, body)`` for ``ToolCalls``: one view call, its
    JSON answer, or ``ApiError`` with the view's problem."""

    def __init__(self, outer: HttpRequest | None, principal: Principal | None):
        self.outer = outer
        self.principal = principal
        self.last: tuple[str, str] | None = None  # (key, path) of the last keyed call

    def __call__(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        return self.call(method, path, body)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        full, _, query = f"{api_base()}/{path}".partition("?")
        data = json.dumps(body or {}).encode() if method in ("POST", "DELETE") else b""
        environ: dict[str, Any] = {
            "REQUEST_METHOD": method, "PATH_INFO": full, "SCRIPT_NAME": "",
            "QUERY_STRING": query, "wsgi.input": io.BytesIO(data),
            "CONTENT_LENGTH": str(len(data)), "CONTENT_TYPE": "application/json",
            "HTTP_ACCEPT": "application/json", "SERVER_NAME": "localhost",
            "SERVER_PORT": "80", "wsgi.url_scheme": "http", "REMOTE_ADDR": "127.0.0.1",
        }
        if self.outer is not None:
            environ.update({k: self.outer.META[k] for k in _KEPT if k in self.outer.META})
        if method in ("POST", "DELETE"):
            # A key of our own on every write, as the stdio server's client
            # sends: a lease it grants is then derived, so only the key is kept.
            key = f"mcp-{uuid.uuid4().hex}"
            environ["HTTP_IDEMPOTENCY_KEY"] = key
            # The view derives the token from the key's digest (api.idempotency).
            self.last = (key_digest(key), full)
        request = WSGIRequest(environ)
        if self.principal is not None:
            request._force_auth_user = self.principal.user  # type: ignore[attr-defined]
            request._force_auth_token = self.principal.auth  # type: ignore[attr-defined]
        match = resolve(full)
        response = match.func(request, *match.args, **match.kwargs)
        if hasattr(response, "render"):
            response.render()
        content = response.content.decode()
        if response.status_code >= 400:
            try:
                found = json.loads(content)
            except ValueError:
                found = {}
            problem = found if isinstance(found, dict) else {}
            problem.setdefault("code", "error")
            problem.setdefault("status", response.status_code)
            detail = str(problem.get("detail", ""))
            raise ApiError(EXIT_USAGE, detail, None, problem)
        if "json" in response.get("Content-Type", ""):
            return json.loads(content or "null")
        return content


class DatabaseLeases:
    """The lease store of one holder: what derives each goal's lease token
    (``McpLease``), never the token. Shared by every web process."""

    def __init__(self, principal: Principal, api: InProcessApi):
        self.principal = principal
        self.api = api

    def get(self, goal_id: str) -> dict[str, Any] | None:
        row = McpLease.objects.filter(holder=self.principal.holder, goal_id=goal_id).first()
        if row is None:
            return None
        return {"token": tokens.replayable_lease(row.owner, row.key, row.path),
                "generation": row.generation}

    def save(self, goal_id: str, lease: dict[str, Any]) -> None:
        if self.api.last is None:
            return
        key, path = self.api.last
        owner = self.principal.user.get_username()
        # Only a token this server can derive again is kept (it always is one:
        # every write of ours carries a key).
        if tokens.replayable_lease(owner, key, path) != lease.get("token"):
            return
        fields = {"generation": int(lease["generation"]), "owner": owner, "key": key,
                  "path": path}
        try:
            with transaction.atomic():
                McpLease.objects.update_or_create(holder=self.principal.holder,
                                                  goal_id=goal_id, defaults=fields)
        except IntegrityError:  # another process saved the same holder's row first
            McpLease.objects.filter(holder=self.principal.holder,
                                    goal_id=goal_id).update(**fields)

    def forget(self, goal_id: str) -> None:
        McpLease.objects.filter(holder=self.principal.holder, goal_id=goal_id).delete()


_tools: tuple[Any, ...] = ()


def tools(request: HttpRequest) -> tuple[Any, ...]:
    """The tool table, from the API's OpenAPI document exactly as the stdio
    server reads it: the same in every process, built on a process's first
    call (asked as that request, so under that request's allowed Host)."""
    global _tools
    if not _tools:
        _tools = tuple(build_tools(InProcessApi(request, None).call("GET", "schema?format=json")))
    return _tools


def server_instructions(request: HttpRequest) -> str:
    """The preface and the skill document, with the URL this request came to."""
    skill = InProcessApi(request, None).call("GET", "skill.md")
    return instructions(request.build_absolute_uri(api_base()), skill)
