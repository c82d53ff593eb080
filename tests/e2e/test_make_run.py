"""`make run`'s supervisor (ledger/project/run.py) for real: a free port, a
temporary var/ with its own SQLite database, gunicorn, the scheduler and the
notification watch as the Procfile starts them. kill -9 of the qcluster leaves
the web serving and the scheduler back; kill -9 of the web brings it back; a second instance on the
busy port exits non-zero before it touches a database; SIGTERM stops all."""

import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from django.db import connection

from ledger.project import run
from tests.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]
START = 180  # seconds: a fresh database's migrations on a loaded 2-core machine


@pytest.fixture
def sqlite_only():
    if connection.vendor != "sqlite":
        pytest.skip("the real `make run` test runs once, in the SQLite half of the suite")


def test_a_listening_port_is_busy_and_a_free_one_is_not():
    import socket
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert run.port_busy("127.0.0.1", port)  # the reason, e.g. "Address already in use"
    assert run.port_busy("127.0.0.1", port) is None


def test_the_procfile_is_the_list_of_processes(tmp_path):
    assert list(run.procfile(ROOT / "Procfile")) == ["web", "scheduler", "watch"]
    odd = tmp_path / "Procfile"
    odd.write_text("# a comment\n\nweb: gunicorn x --bind a:$PORT\nworker:python -m y\n")
    assert run.procfile(odd) == {"web": "gunicorn x --bind a:$PORT", "worker": "python -m y"}


def test_the_supervisor_describes_every_process_it_runs(capsys):
    """Its help and its docstring name each Procfile process (they named two
    of the three)."""
    with pytest.raises(SystemExit):
        run.main(["--help"])
    described = " ".join(capsys.readouterr().out.split())
    for name, what in {"web": "the web", "scheduler": "the scheduler",
                       "watch": "the watch"}.items():
        assert what in described, name
        assert f"``{name}``" in (run.__doc__ or "")


def free_port() -> int:
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def environment(var: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if key not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE", "SECRET_KEY",
                          "WAKELEDGER_DISPATCHERS", "WAKELEDGER_BIND"}}
    return {**env, "WAKELEDGER_VAR_DIR": str(var), "PYTHONPATH": str(ROOT),
            "WAKELEDGER_Q_WORKERS": "1", "WAKELEDGER_WEB_WORKERS": "1"}


def serves(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/health", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def started(log: Path, name: str) -> list[int]:
    """The pids the supervisor said it started ``name`` as, in order."""
    return [int(pid) for pid in re.findall(rf"run \| {name} started \(pid (\d+)\)",
                                           log.read_text(errors="replace"))]


def cluster_of(launcher: int) -> int | None:
    """The qcluster the scheduler's launcher runs (its child), when it runs."""
    try:
        children = Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split()
    except OSError:
        return None
    for pid in children:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            if b"qcluster" in cmdline.read():
                return int(pid)
    return None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose.
    return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


@pytest.mark.slow
def test_make_run_survives_a_killed_scheduler_and_web_and_refuses_a_busy_port(tmp_path,
                                                                             sqlite_only):
    port, log = free_port(), tmp_path / "run.log"
    with open(log, "wb") as out:
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "ledger.project.run", "--port", str(port), "--grace", "30"],
            cwd=ROOT, env=environment(tmp_path / "var"), stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: serves(port), START, "the web to serve")
        [launcher] = wait_for(lambda: started(log, "scheduler"), START, "the scheduler")
        cluster = wait_for(lambda: cluster_of(launcher), START, "the qcluster")
        [web] = started(log, "web")
        [watch] = wait_for(lambda: started(log, "watch"), START, "the notification watch")

        # A second `make run` on the busy port: one line, non-zero, no database.
        other = tmp_path / "other-var"
        second = subprocess.run(
            [sys.executable, "-m", "ledger.project.run", "--port", str(port)], cwd=ROOT,
            env=environment(other), capture_output=True, text=True, timeout=60)
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"port {port} on 127.0.0.1 is busy" in second.stderr
        assert second.stdout == "" and len(second.stderr.strip().splitlines()) == 1
        assert not other.exists()  # no settings read: no var/, no SQLite file, no migration

        # kill -9 of the qcluster: the web goes on serving, the scheduler comes back.
        os.kill(cluster, signal.SIGKILL)
        relaunched = wait_for(lambda: started(log, "scheduler")[1:], START,
                              "the scheduler's restart")[0]
        assert serves(port)
        wait_for(lambda: cluster_of(relaunched), START, "the restarted qcluster")
        text = log.read_text()
        assert f"scheduler: the cluster (pid {cluster}) died (signal 9)" in text
        assert f"scheduler (pid {launcher}) died (exit code 137)" in text
        assert "scheduler restarted" in text
        assert started(log, "web") == [web]  # the web was never restarted

        # kill -9 of the web: back on the same port; the scheduler untouched.
        os.kill(web, signal.SIGKILL)
        wait_for(lambda: started(log, "web")[1:], START, "the web's restart")
        wait_for(lambda: serves(port), START, "the restarted web to serve")
        assert f"web (pid {web}) died (signal 9)" in log.read_text()
        assert started(log, "scheduler") == [launcher, relaunched]

        # SIGTERM: everything stops, cleanly, and the supervisor exits 0.
        assert started(log, "watch") == [watch]  # neither kill touched the watch
        children = [started(log, "web")[-1], relaunched, cluster_of(relaunched), watch]
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=60) == 0
        assert not [pid for pid in children if pid and alive(pid)]
        assert "run | stopped" in log.read_text()
        assert "stopped after" in log.read_text()  # the watch ended its loop on SIGTERM
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()
