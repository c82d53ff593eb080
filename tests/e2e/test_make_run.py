"""`make run`'s supervisor (ledger/project/run.py) for real: a free port, a
temporary var/ with its own SQLite database, gunicorn, the scheduler and the
notification watch as the Procfile starts them. kill -9 of the qcluster leaves
the web serving and the scheduler back; kill -9 of the web brings it back; a second instance on the
busy port exits non-zero before it touches a database; SIGTERM stops all."""

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
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
    for name in run.procfile(ROOT / "Procfile"):
        assert re.search(rf"\b{name}\b", described), name
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
    return [int(pid) for pid in re.findall(rf" run \[-\] {name} started \(pid (\d+)\)",
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
        assert f"scheduling.scheduler [-] the cluster (pid {cluster}) died (signal 9)" in text
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
        assert "INFO run [-] stopped" in log.read_text()
        assert "stopped after" in log.read_text()  # the watch ended its loop on SIGTERM
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()


# A text line: the time, the level, the logger, the request id, the message.
TEXT_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} "
                       r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+ \[[^\]\s]+\] .*")
FIELDS = {"time", "level", "logger", "request_id", "message"}


def asked(port: int, request_id: str, host: str = "127.0.0.1") -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/health",
                                     headers={"X-Request-ID": request_id, "Host": host})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 (http)
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def serve_ask_and_stop(port: int, env: dict[str, str], form: str, log: Path) -> None:
    """make run (set up the first time, not the second), until the sweeper
    ran; two requests; SIGTERM."""
    argv = [sys.executable, "-m", "ledger.project.run", "--port", str(port), "--grace", "30"]
    with open(log, "wb") as out:
        supervisor = subprocess.Popen(argv + (["--no-setup"] if form == "text" else []),
                                      cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: serves(port), START, "the web to serve")
        # The watch's "scheduler ok": the sweeper ran (its tasks were enqueued
        # and processed: django-q2's routine happened).
        wait_for(lambda: "scheduler ok" in log.read_text(), START, "the first sweep")
        wait_for(lambda: "[wakeledger] running." in log.read_text(), START, "the cluster")
        assert asked(port, f"req-{form}-1") == 200
        assert asked(port, f"req-{form}-2", host="evil.example") == 400
        wait_for(lambda: f"req-{form}-2" in log.read_text(), 30, "the access lines")
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=60) == 0
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()


@pytest.mark.slow
def test_one_log_format_per_setting_from_every_process(tmp_path, sqlite_only):
    """WAKELEDGER_LOG_FORMAT=json: every line of every process (the
    supervisor, the set-up, gunicorn's error and access logs, the scheduler,
    django-q2, the watch) is one JSON object with the same fields, the access
    line with the request's id; django-q2's routine is not at INFO; a bad Host
    is one WARNING. Then the same server with text logs: every line one text
    line of the same fields."""
    port, var = free_port(), tmp_path / "var"
    env = {**environment(var), "WAKELEDGER_WATCH_SECONDS": "1",
           "WAKELEDGER_Q_GUARD_CYCLE": "30"}  # the cluster sweeps at start-up
    for form in ("json", "text"):
        log = tmp_path / f"{form}.log"
        serve_ask_and_stop(port, {**env, "WAKELEDGER_LOG_FORMAT": form}, form, log)
        lines = [line for line in log.read_text().splitlines() if line.strip()]
        if form == "json":
            records = [json.loads(line) for line in lines]  # each line, JSON
            assert all(set(record) >= FIELDS for record in records)
            said = [(r["logger"], r["level"], r["request_id"], r["message"]) for r in records]
        else:
            assert [line for line in lines if not TEXT_LINE.fullmatch(line)] == []
            said = [(line.split()[3], line.split()[2], line.split()[4].strip("[]"),
                     line.split("] ", 1)[1]) for line in lines]
        loggers = {logger for logger, *_ in said}
        assert {"run", "gunicorn.error", "gunicorn.access", "django-q",
                "scheduling.scheduler", "ledger.watch"} <= loggers, loggers
        access = [s for s in said if s[0] == "gunicorn.access" and s[2] == f"req-{form}-1"]
        assert access and '"GET /api/v1/health HTTP/1.1" 200' in access[0][3]
        host = [s for s in said if s[0] == "django.security.DisallowedHost"]
        assert [level for _, level, *_ in host] == ["WARNING"]
        assert host[0][2] == f"req-{form}-2"  # the request's id, on the app's line too
        assert not any("Traceback" in s[3] for s in said)
        chatter = [s[3] for s in said if s[0] == "django-q" and s[1] == "INFO"]
        assert chatter and all(m.startswith("Q Cluster ") for m in chatter), chatter
        assert not any("never_ran" in s[3] for s in said)
