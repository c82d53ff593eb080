"""A local fake of Anthropic's Messages API, enough of it for the real Claude
Code CLI run headless (``ANTHROPIC_BASE_URL`` on loopback): the streaming SSE
answer of ``POST /v1/messages``, a scripted rate limit, and a record of every
request so a test can see what the CLI sent.

The script: while ``limited`` is set, every messages call answers 429 with a
``retry-after`` header and Anthropic's error body; after that, a call that
offers the Bash tool and has no tool result yet answers one ``tool_use`` of
Bash running ``bash_command``; anything else answers a short text.

Two more scripts for the failures that do not end a turn: ``limited_model``
(a substring of a model name) limits only the requests for that model, and
``agent_prompt`` makes the main thread's first answer an ``Agent`` tool call
(a foreground subagent on ``agent_model``) instead of Bash.
"""

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def error_body(message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "rate_limit_error", "message": message}}


class FakeAnthropic:
    def __init__(self) -> None:
        self.limited = True
        self.retry_after = "120"
        self.message = "This request would exceed your account's rate limit."
        self.bash_command = "true"
        self.limited_model = ""  # set: only that model's requests meet the limit
        self.agent_prompt = ""  # set: the main thread first calls a subagent with it
        self.agent_model = "haiku"
        # Seconds an answer after a tool result takes: a real model's latency,
        # during which a hook the tool's end started has time to run.
        self.tool_result_latency = 0.0
        # A usage limit as claude.ai accounts meet it: the unified rate-limit
        # headers with this reset (epoch seconds); the limit lifts at it.
        self.unified_reset: float | None = None
        self.requests: list[dict[str, Any]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "FakeAnthropic":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def limit_headers(self) -> dict[str, str]:
        if self.unified_reset is None:
            return {"retry-after": self.retry_after}
        return {"retry-after": str(max(1, int(self.unified_reset - time.time()))),
                "anthropic-ratelimit-unified-status": "rejected",
                "anthropic-ratelimit-unified-reset": str(int(self.unified_reset)),
                "anthropic-ratelimit-unified-representative-claim": "five_hour"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._json(404, {"type": "error", "error": {"type": "not_found_error",
                                                            "message": "no such path"}})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                limited = fake.limited and (not fake.limited_model or fake.limited_model
                                            in str(body.get("model") or ""))
                if fake.unified_reset is not None and time.time() >= fake.unified_reset:
                    limited = False
                fake.requests.append({"path": self.path, "body": body, "limited": limited})
                if not self.path.startswith("/v1/messages"):
                    self._json(404, {"type": "error", "error": {"type": "not_found_error",
                                                                "message": "no such path"}})
                elif self.path.startswith("/v1/messages/count_tokens"):
                    self._json(200, {"input_tokens": 10})
                elif limited:
                    self._json(429, error_body(fake.message), fake.limit_headers())
                else:
                    if fake.tool_result_latency and _has_tool_result(body):
                        time.sleep(fake.tool_result_latency)
                    self._stream(body)

            def _json(self, status: int, body: Any, headers: dict[str, str] | None = None):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", "req_fake")
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any]) -> None:
                events = sse_events(body, fake.bash_command, fake.agent_prompt,
                                    fake.agent_model)
                if not body.get("stream"):
                    self._json(200, events[0][1]["message"] | {"content": [
                        b["content_block"] for _, b in events if b.get("type") ==
                        "content_block_start"]})
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("request-id", "req_fake")
                self.end_headers()
                for name, data in events:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

        return Handler


def _offers_bash(body: dict[str, Any]) -> bool:
    return any(tool.get("name") == "Bash" for tool in body.get("tools") or [])


def _has_tool_result(body: dict[str, Any]) -> bool:
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content")
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content)


def _offers(body: dict[str, Any], name: str) -> bool:
    return any(tool.get("name") == name for tool in body.get("tools") or [])


def sse_events(body: dict[str, Any], bash_command: str, agent_prompt: str = "",
               agent_model: str = "haiku") -> list[tuple[str, dict[str, Any]]]:
    """The stream of one answer: an Agent or a Bash tool_use, or a text."""
    message = {"id": f"msg_{uuid.uuid4().hex[:12]}", "type": "message", "role": "assistant",
               "model": body.get("model", "claude-fake"), "content": [],
               "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": 10, "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": message})]
    if agent_prompt and _offers(body, "Agent") and not _has_tool_result(body):
        block = {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:12]}", "name": "Agent",
                 "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(
            {"description": "A side task", "prompt": agent_prompt,
             "subagent_type": "general-purpose", "model": agent_model,
             "run_in_background": False})}
        stop = "tool_use"
    elif _offers_bash(body) and not _has_tool_result(body):
        block = {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:12]}", "name": "Bash",
                 "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(
            {"command": bash_command, "description": "Record the work in Wake Ledger"})}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": "Done."}
        stop = "end_turn"
    events += [
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events
