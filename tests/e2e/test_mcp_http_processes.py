"""/mcp behind two web processes: two gunicorn servers (sync workers, as the
Procfile runs them) on one SQLite database, behind one URL (a round-robin
proxy in the test), serve one MCP client's session, consecutive calls
landing on different processes. The lease the client's goal holds is kept in
the database as a derivation, so a fenced call works on whichever process
answers it."""

import http.server
import itertools
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import anyio
import pytest

from tests.e2e.test_deploy import environment, free_port, wait_until_serving
from tests.e2e.test_mcp_http import REDACTED, Session, connect

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")),
                       reason="runs once, in the SQLite half (it brings its own var/)"),
]


class RoundRobin(http.server.ThreadingHTTPServer):
    """One URL in front of several servers: each request to the next one."""

    def __init__(self, backends: list[str]):
        self.backends = itertools.cycle(backends)
        self.served: Counter[str] = Counter()
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), Forward)

    def next_backend(self) -> str:
        with self.lock:
            return next(self.backends)


class Forward(http.server.BaseHTTPRequestHandler):
    server: RoundRobin

    def forward(self) -> None:
        backend = self.server.next_backend()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("connection", "content-length", "transfer-encoding")}
        request = urllib.request.Request(backend + self.path, data=body,  # noqa: S310
                                         headers=headers, method=self.command)
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
                status, answer_headers, content = answer.status, answer.headers, answer.read()
        except urllib.error.HTTPError as error:
            status, answer_headers, content = error.code, error.headers, error.read()
        if self.path.startswith("/mcp"):
            with self.server.lock:
                self.server.served[backend] += 1
        self.send_response(status)
        for key, value in answer_headers.items():
            if key.lower() not in ("connection", "content-length", "transfer-encoding",
                                   "server", "date"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    do_GET = do_POST = do_DELETE = forward

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_one_session_across_two_web_processes(tmp_path):
    var = tmp_path / "var"
    env = environment(var, PYTHONPATH=str(ROOT), SECRET_KEY="two-processes-" + "k" * 50)
    # One process migrates the fresh var/ and creates the agent (as `ledger
    # agent create` does): a Python start-up less than two commands.
    setup = ("import django; django.setup(); from django.core.management import call_command; "
             "call_command('migrate', interactive=False, verbosity=0); "
             "call_command('ledger', 'agent', 'create', 'two-process-agent')")
    created = subprocess.run([sys.executable, "-c", setup], cwd=ROOT, env=env,
                             capture_output=True, text=True, check=True, timeout=180)
    token = created.stdout.strip().splitlines()[-1].strip()
    assert token.startswith("wl_")
    processes, backends = [], []
    try:
        for _ in range(2):
            port = free_port()
            process = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "-c", "python:ledger.project.gunicorn_conf",
                 "ledger.project.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
            processes.append(process)
            backends.append(f"http://127.0.0.1:{port}")
            wait_until_serving(backends[-1], process)
        proxy = RoundRobin(backends)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{proxy.server_address[1]}/mcp"

        async def scenario() -> None:
            async with connect(url, token) as client:
                session = Session(client)
                started = await session.ok(
                    "run_goal", goal_key="two", workspace="/srv/two", objective="o",
                    done_criteria=["d"], policy={"scheduler": "host"})
                goal_id = started["goal"]["id"]
                assert started["lease"]["token"] == REDACTED
                for n in range(3):  # fenced calls, each on the other process
                    await session.ok("checkpoint_goal", goal_id=goal_id,
                                     current_step=f"step {n}", progress_pct=10 * (n + 1))
                    await session.ok("heartbeat", goal_id=goal_id)
                prepared = await session.ok("prepare_scheduled_continuation", goal_id=goal_id)
                await session.ok("record_watchdog_receipt", goal_id=goal_id, status="created",
                                 host_ref="task-2", due_at=prepared["host_schedule"]
                                 ["first_due_at"])
                await session.ok("cancel_scheduled_continuation", goal_id=goal_id)
                await session.ok("record_watchdog_receipt", goal_id=goal_id,
                                 status="cancelled")
                finished = await session.ok("finish_goal", goal_id=goal_id,
                                            status="completed", summary="done", evidence=[
                                                {"criterion": "d", "evidence": "e"}])
                assert finished["completion_state"] == "completed"
                assert not any("wll_" in text for text in session.texts)

        anyio.run(scenario)
        proxy.shutdown()
        # Both processes served the session's calls, about half each.
        assert set(proxy.served) == set(backends) and min(proxy.served.values()) >= 5
    finally:
        for process in processes:
            os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
