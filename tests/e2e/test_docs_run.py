"""The pages a newcomer and an operator follow, run as written against a real
`make run` (ledger/project/run.py: web, scheduler and watch on a fresh SQLite
database): the quickstart end to end (its wake included), the README's agent
in ten lines, and the operator recipes of docs/operators.md and
docs/notifications.md. What each command prints is compared with what the
page shows, under the placeholders docs/doc-tests.md describes (tests/docrun.py).

One server for the module, started by the quickstart's own `make run` block
(its port replaced by a free one); the pages run in this file's order, the
quickstart first (its `ledger goals` shows its one goal). In the SQLite half
only: `make run` serves SQLite, as the pages say; the PostgreSQL half would
add a second server's migrations for the same commands.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from django.db import connection

from tests import docrun
from tests.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART, README = ROOT / "docs" / "quickstart.md", ROOT / "README.md"
OPERATORS, NOTIFICATIONS = ROOT / "docs" / "operators.md", ROOT / "docs" / "notifications.md"
START = 240  # seconds: a fresh database's migrations on a loaded 2-core machine
DOC_PORTS = {QUICKSTART: "18765", README: "8000", OPERATORS: "8000", NOTIFICATIONS: "8000"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scratch():
    """Short paths (a table cuts a long workspace), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="wl-docs-") as folder:
        yield Path(folder)


def free_port() -> int:
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    def __init__(self, port: int, var: Path, log: Path):
        self.port, self.var, self.log = port, var, log
        self.process: subprocess.Popen | None = None

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def serves(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/health",
                                        timeout=5) as answer:
                return answer.status == 200
        except OSError:
            return False


@pytest.fixture(scope="module")
def server(scratch):
    """`make run PORT=…` as the quickstart writes it, on a var/ of its own."""
    if connection.vendor != "sqlite":
        pytest.skip("the pages run once, in the SQLite half (`make run` serves SQLite)")
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed (`make jq`): the pages trim JSON with it")
    [block] = [b for b in docrun.blocks(QUICKSTART) if b.directive == "server"]
    [command] = [line[2:] for line in block.lines if line.startswith("$ ")]
    port = free_port()
    server = Server(port, scratch / "var", scratch / "run.log")
    env = docrun.shell_environment(scratch / "home", WAKELEDGER_VAR_DIR=str(server.var),
                                   WAKELEDGER_Q_WORKERS="1", WAKELEDGER_WEB_WORKERS="1")
    with open(server.log, "wb") as out:
        server.process = subprocess.Popen(
            ["bash", "-c", command.replace(DOC_PORTS[QUICKSTART], str(port))], cwd=ROOT,
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(server.serves, START, "`make run` to serve")
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.process.pid, signal.SIGTERM)  # make and run.py: a clean stop
        try:
            server.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(server.process.pid, signal.SIGKILL)
            server.process.wait()
        # run.py's children have sessions of their own: wait until they are gone.
        wait_for(lambda: not server.serves(), 60, "the server to stop")


def page(path: Path, server: Server, scratch: Path, **stand_ins: str) -> docrun.Page:
    """A reader's shell for one page: a home of its own (so `~/.wakeledger`
    is the test's), the server's var/, and the page's port and scratch
    folders replaced by the test's."""
    home = scratch / "home"
    shell = scratch / "shell"
    shell.mkdir(exist_ok=True)
    with contextlib.suppress(FileExistsError):
        (shell / "wake-ledger").symlink_to(ROOT)  # the clone `cd wake-ledger` enters
    env = docrun.shell_environment(home, WAKELEDGER_VAR_DIR=str(server.var))
    doc_port = DOC_PORTS[path]
    # 18765 is the quickstart's own port, a number nothing else is; 8000,
    # the default, is replaced only where it is the port.
    ours = ({doc_port: str(server.port)} if doc_port == "18765" else
            {f"127.0.0.1:{doc_port}": f"127.0.0.1:{server.port}",
             f"PORT={doc_port}": f"PORT={server.port}"})
    ours.update(stand_ins)
    return docrun.Page(path, home, shell / "wake-ledger", env, stand_ins=ours)


def test_the_quickstart_runs_as_written(server, scratch):
    """About 90 s of it is the wait for the wake (60 s, then the scheduler's
    next look at its schedules, every 30 s)."""
    quickstart = page(QUICKSTART, server, scratch, **{
        "/tmp/wakeledger-quickstart": str(scratch / "qs"),  # noqa: S108 (the page's)
        "$PWD/var/agent": str(scratch / "quickstart-agent")})
    quickstart.cwd = scratch / "shell"
    (quickstart.state / "cwd").write_text(str(quickstart.cwd))
    started = time.monotonic()
    ran = docrun.run_page(quickstart, server_output=server.output)
    assert ran >= 12 and time.monotonic() - started < 400
    assert (scratch / "qs" / "hello.py").exists()


def test_the_readmes_agent_in_ten_lines_runs_as_written(server, scratch):
    readme = page(README, server, scratch,
                  **{"/tmp/wakeledger-readme": str(scratch / "rd")})  # noqa: S108
    [ten] = [b.line for b in docrun.blocks(README) if "wakeledger start" in "\n".join(b.lines)]
    assert docrun.run_page(readme, only=lambda block: block.line == ten) >= 8
    # What the README says it writes, and where: the lease file under ~/.wakeledger.
    assert (scratch / "home" / ".wakeledger").is_dir()
    assert (scratch / "rd" / "hello.py").exists()


@pytest.mark.parametrize("path", [NOTIFICATIONS, OPERATORS], ids=lambda p: p.name)
def test_the_operator_recipes_run_as_written(server, scratch, path):
    recipes = page(path, server, scratch, **{
        "/tmp/wakeledger-operators": str(scratch / "op")})  # noqa: S108
    ran = docrun.run_page(recipes, server_output=server.output,
                          only=lambda block: block.lang == "console")
    assert ran >= 3
