"""Local HTTP receivers for webhook dispatches (real HTTP on 127.0.0.1).

``receiving()`` serves a plain receiver that records every POST and answers
as told (status, extra headers, a delay, an optional signature check);
``openclaw_gateway()`` serves a stand-in for an OpenClaw Gateway's
``POST /hooks/agent`` that enforces the documented contract (auth, field
names and types, the session-key policy) and refuses anything else with 400,
as the real Gateway does.
"""

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from scheduling.signatures import HEADER, verify_signature


class Receiver(BaseHTTPRequestHandler):
    received: list = []  # (headers, body) of every POST
    gets: list = []  # (path, headers) of anything else: a followed redirect shows here
    status = 202
    headers_out: dict[str, str] = {}
    delay = 0.0
    secret: str | None = None  # when set, a bad signature is answered 401

    def do_POST(self):  # http.server's naming
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Receiver.received.append((dict(self.headers), body))
        if Receiver.delay:
            threading.Event().wait(Receiver.delay)
        status = Receiver.status
        if Receiver.secret is not None and not verify_signature(
                Receiver.secret, self.headers.get(HEADER), body):
            status = 401
        self._answer(status, Receiver.headers_out)

    def do_GET(self):
        Receiver.gets.append((self.path, dict(self.headers)))
        self._answer(200, {})

    def _answer(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def receiving(*, status: int = 202, headers: dict[str, str] | None = None, delay: float = 0.0,
              secret: str | None = None) -> Iterator[tuple[str, list]]:
    """Serve a receiver; yields its URL and the list of (headers, body) it got."""
    Receiver.received, Receiver.gets = [], []
    Receiver.status, Receiver.headers_out = status, dict(headers or {})
    Receiver.delay, Receiver.secret = delay, secret
    with serving(Receiver) as port:
        yield f"http://127.0.0.1:{port}/hook", Receiver.received


# ------------------------------------------------------------------ OpenClaw

# POST /hooks/agent as OpenClaw documents it (docs/automation/webhook.md and
# src/gateway/hooks.ts normalizeAgentPayload): field -> type.
OPENCLAW_AGENT_FIELDS: dict[str, type] = {
    "message": str, "name": str, "agentId": str, "idempotencyKey": str, "wakeMode": str,
    "sessionKey": str, "deliver": bool, "channel": str, "to": str, "model": str,
    "thinking": str, "timeoutSeconds": int,
}


def openclaw_contract(body: Any, headers: dict[str, str], *, allow_request_session_key: bool,
                      session_key_prefixes: tuple[str, ...] = ()) -> list[str]:
    """What is wrong with a /hooks/agent request body (empty: nothing)."""
    if not isinstance(body, dict):
        return ["the body must be a JSON object"]
    problems = [f"{key} is not a documented field" for key in body
                if key not in OPENCLAW_AGENT_FIELDS]
    problems += [f"{key} must be a {kind.__name__}" for key, kind in OPENCLAW_AGENT_FIELDS.items()
                 if key in body and (not isinstance(body[key], kind)
                                     or (kind is int and isinstance(body[key], bool)))]
    if problems:
        return problems
    if not body.get("message", "").strip():
        problems.append("message required")
    if "idempotencyKey" in body:
        key = body["idempotencyKey"].strip()
        if not key or len(key) > 256:
            problems.append("idempotencyKey must be 1-256 characters")
        header = headers.get("Idempotency-Key")
        if header is not None and header != body["idempotencyKey"]:
            problems.append("the Idempotency-Key header and idempotencyKey differ")
    if body.get("wakeMode", "now") not in ("now", "next-heartbeat"):
        problems.append("wakeMode must be now or next-heartbeat")
    if "sessionKey" in body:
        if not allow_request_session_key:
            problems.append("sessionKey is disabled for external /hooks/agent payloads")
        elif session_key_prefixes and not body["sessionKey"].lower().startswith(
                session_key_prefixes):
            problems.append("sessionKey must start with an allowed prefix")
    return problems


class Gateway(BaseHTTPRequestHandler):
    token = "hooks-token"
    allow_request_session_key = True
    session_key_prefixes: tuple[str, ...] = ()
    accepted: list = []  # (headers, body) of accepted agent runs
    refused: list = []  # (status, problems)

    def do_POST(self):  # http.server's naming
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/hooks/agent":
            return self._answer(404, {"ok": False, "error": "not found"})
        auth = self.headers.get("Authorization", "")
        if auth != f"Bearer {Gateway.token}":
            Gateway.refused.append((401, ["unauthorized"]))
            return self._answer(401, {"ok": False, "error": "unauthorized"})
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        problems = openclaw_contract(
            body, dict(self.headers), allow_request_session_key=Gateway.allow_request_session_key,
            session_key_prefixes=Gateway.session_key_prefixes)
        if problems:
            Gateway.refused.append((400, problems))
            return self._answer(400, {"ok": False, "error": "; ".join(problems)})
        Gateway.accepted.append((dict(self.headers), body))
        return self._answer(202, {"ok": True, "runId": f"run-{len(Gateway.accepted)}"})

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@contextmanager
def openclaw_gateway(*, token: str = "hooks-token",  # noqa: S107 - a test token
                     allow_request_session_key: bool = True,
                     session_key_prefixes: tuple[str, ...] = ()) -> Iterator[str]:
    """Serve a Gateway stand-in; yields the URL of its /hooks/agent."""
    Gateway.token, Gateway.allow_request_session_key = token, allow_request_session_key
    Gateway.session_key_prefixes = session_key_prefixes
    Gateway.accepted, Gateway.refused = [], []
    with serving(Gateway) as port:
        yield f"http://127.0.0.1:{port}/hooks/agent"


# ------------------------------------------------------------------ SMTP


@contextmanager
def smtp_receiving() -> Iterator[tuple[int, list]]:
    """A real SMTP server (aiosmtpd) on 127.0.0.1; yields its port and the
    list of messages (``email.message.Message``) it accepted."""
    import email
    import socket

    from aiosmtpd.controller import Controller

    messages: list = []

    class Handler:
        async def handle_DATA(self, server, session, envelope):  # aiosmtpd's naming
            messages.append(email.message_from_bytes(envelope.content))
            return "250 OK"

    # aiosmtpd checks its own port once started, so it needs a known one:
    # a port the kernel just handed out and nobody holds.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(Handler(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port, messages
    finally:
        controller.stop()
