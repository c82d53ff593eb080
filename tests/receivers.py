"""A local HTTP receiver for webhook dispatches (real HTTP on 127.0.0.1)."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer


class Receiver(BaseHTTPRequestHandler):
    received: list = []
    status = 202

    def do_POST(self):  # http.server's naming
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Receiver.received.append((dict(self.headers), body))
        self.send_response(Receiver.status)
        self.end_headers()

    def log_message(self, *args):
        pass


@contextmanager
def receiving() -> Iterator[tuple[str, list]]:
    """Serve a receiver; yields its URL and the list of (headers, body) it got."""
    Receiver.received = []
    server = HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/hook", Receiver.received
    finally:
        server.shutdown()
