"""A local fake OpenAI-compatible provider, enough for a real OpenClaw Gateway
(``api: "openai-completions"``): ``GET /v1/models`` and the streaming (SSE)
``POST /v1/chat/completions``, with a scripted answer per request.

``script`` is a list of answers taken in order, one per request; when it is
empty, ``default`` answers. An answer is a tuple:

- ``("text", "words")``: a normal streamed reply;
- ``("usage_limit", "message")``: a 429 whose body says a usage limit, with
  ``retry-after: 3600``;
- ``("rate_limit", "message")``: a generic 429 with ``retry-after: 0``;
- ``("tool", "name-part", {args})``: one tool call of the first offered tool
  whose name contains ``name-part`` (or the text "no such tool"); OpenClaw
  reaches MCP tools through its ``tool_call`` tool (``{"id": "server__tool",
  "args": …}``). The request that carries the call's result takes the next
  answer.

Every request is recorded (``requests``) so a test sees what OpenClaw sent.
"""

import json
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[Any, ...]


class FakeOpenAI:
    def __init__(self) -> None:
        self.script: list[Answer] = []
        self.default: Answer = ("text", "Done.")
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> "FakeOpenAI":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer_for(self, body: dict[str, Any]) -> Answer:
        with self.lock:
            self.requests.append(body)
            return self.script.pop(0) if self.script else self.default

    def count(self, predicate: Callable[[dict[str, Any]], bool]) -> int:
        with self.lock:
            return sum(1 for body in self.requests if predicate(body))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._json(200, {"object": "list", "data": [
                    {"id": "fake-model", "object": "model", "owned_by": "fake"}]})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                answer = fake.answer_for(body)
                kind = answer[0]
                if kind == "usage_limit":
                    self._json(429, {"error": {"message": answer[1], "type": "usage_limit_reached",
                                               "code": "usage_limit_reached"}},
                               {"retry-after": "3600"})
                elif kind == "rate_limit":
                    self._json(429, {"error": {"message": answer[1], "type": "requests",
                                               "code": "rate_limit_exceeded"}},
                               {"retry-after": "0"})
                elif kind == "tool":
                    self._tool(body, answer[1], answer[2])
                else:
                    self._stream(body, [{"role": "assistant", "content": answer[1]}], "stop")

            def _tool(self, body: dict[str, Any], part: str, args: dict[str, Any]) -> None:
                names = [t.get("function", {}).get("name", "") for t in body.get("tools") or []]
                name = next((n for n in names if part in n), None)
                if name is None:
                    self._stream(body, [{"role": "assistant",
                                         "content": f"no such tool: {part}"}], "stop")
                    return
                call = {"index": 0, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)}}
                self._stream(body, [{"role": "assistant", "content": None,
                                     "tool_calls": [call]}], "tool_calls")

            def _stream(self, body: dict[str, Any], deltas: list[dict[str, Any]],
                        finish: str) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                base = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                        "object": "chat.completion.chunk", "created": 0,
                        "model": body.get("model", "fake-model")}
                chunks = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
                          for d in deltas]
                chunks.append({**base, "choices": [{"index": 0, "delta": {},
                                                    "finish_reason": finish}]})
                chunks.append({**base, "choices": [], "usage": {
                    "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
                for chunk in chunks:
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def _json(self, status: int, payload: dict[str, Any],
                      headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        return Handler
