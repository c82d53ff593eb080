"""The service run as `make run` runs it, in real processes: gunicorn from the
Procfile's own command line, the whole Procfile under `make run`'s supervisor
(ledger/project/run.py), on a fresh var/ directory. What an operator would
check by hand after deploying: file modes, the access log, the throttle
across workers, a clean stop, the settings a PostgreSQL deployment must have."""

import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from ledger.access import accounts
from tests.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TOKEN = "wl_AbCdEfGh_" + "query-string-secret-0123456789"
LEASE = "wll_" + "lease-secret-in-the-query-0123456789"
HEADER_TOKEN = "wl_ZyXwVuTs_" + "header-secret-0123456789abcdef"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")),
                       reason="runs once, in the SQLite half (it brings its own var/)"),
]


def environment(var: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("WAKELEDGER_", "DJANGO_", "PYTEST_")) and k != "DATABASE_URL"}
    return {**base, "WAKELEDGER_VAR_DIR": str(var),
            "DJANGO_SETTINGS_MODULE": "ledger.project.settings",
            "PATH": f"{BIN}:{base.get('PATH', '/usr/bin:/bin')}", **extra}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(scope="module")
def var(tmp_path_factory) -> Path:
    """A migrated var/ of a fresh checkout."""
    var = tmp_path_factory.mktemp("deploy") / "var"
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT,
                   env=environment(var), check=True, timeout=180)
    return var


def wait_until_serving(url: str, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/api/v1/health", timeout=2):  # noqa: S310
                return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"nothing answered at {url} within {timeout} s")


def status_of(url: str, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, headers=headers or {})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def procfile_command(name: str) -> str:
    for line in (ROOT / "Procfile").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return line.partition(":")[2].strip()
    raise AssertionError(f"no {name} in the Procfile")


@pytest.fixture(scope="module")
def web(var, tmp_path_factory):
    """gunicorn started with the Procfile's `web` line (2 workers), its output
    (access log included) captured in a file."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("web") / "web.log"
    env = environment(var, PORT=str(port), WAKELEDGER_WEB_WORKERS="2",
                      WAKELEDGER_BAD_TOKEN_LIMIT="6")
    with open(log_path, "wb") as log:
        process = subprocess.Popen(procfile_command("web"), shell=True, cwd=ROOT, env=env,  # noqa: S602
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(url, process)
        yield url, log_path, process
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def test_tokens_in_the_query_string_never_reach_the_logs(web):
    url, log_path, _ = web
    assert status_of(f"{url}/api/v1/goals?token={TOKEN}&after=3") == 401
    assert status_of(f"{url}/api/v1/goals?access_token={TOKEN}") == 401
    assert status_of(f"{url}/api/v1/goals?lease={LEASE}") == 401
    assert status_of(f"{url}/api/v1/goals?q={TOKEN}") == 401  # any name: it looks like ours
    assert status_of(f"{url}/api/v1/goals",
                     {"Authorization": f"Bearer {HEADER_TOKEN}"}) == 401
    # The access log is written after the response: wait for all five lines.
    output = wait_for(lambda: (text := log_path.read_text()).count('HTTP/1.1" 401') >= 5
                      and text, 30, "the five requests in the access log")
    # The requests were logged (so the test can fail) ...
    assert 'GET /api/v1/goals?token=[redacted]&after=3 HTTP/1.1" 401' in output
    assert "access_token=[redacted]" in output and "lease=[redacted]" in output
    # ... without a trace of any secret.
    for secret in (TOKEN, LEASE, HEADER_TOKEN, TOKEN[12:], LEASE[4:], HEADER_TOKEN[12:]):
        assert secret not in output


def test_a_chunked_body_is_refused_with_411_by_the_real_server(web):
    """Gunicorn hands Django a chunked body with no Content-Length,
    which Django reads as empty; the API refuses it instead (before any token
    is looked at, so the bad-token count below is untouched)."""
    import http.client
    import json
    from urllib.parse import urlsplit

    url, _, _ = web
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        connection.request("POST", "/api/v1/goals", body=iter([b'{"goal_key": "x"}']),
                           headers={"Content-Type": "application/json"},
                           encode_chunked=True)
        answer = connection.getresponse()
        body = json.loads(answer.read())
    finally:
        connection.close()
    assert answer.status == 411 and body["code"] == "length_required"


def test_bad_tokens_are_counted_across_gunicorn_workers(web):
    """The limit is 6 per address, whichever of the two workers answers."""
    url, log_path, _ = web
    headers = {"Authorization": "Bearer wl_QqQqQqQq_" + "not-a-token-at-all-0123456789"}
    def workers_seen() -> dict[str, set[int]]:
        seen: dict[str, set[int]] = {}
        for line in log_path.read_text().splitlines():
            if "probe=throttle" in line:
                status, pid = re.search(r'" (\d{3}) .* <(\d+)>', line).groups()
                seen.setdefault(pid, set()).add(int(status))
        return seen

    # A worker that answered a good token from this address within the last
    # second still holds its "not locked out" (ledger/access/accounts.py): start
    # past that, so every answer below reads the shared count.
    time.sleep(accounts.NOT_LOCKED_MEMO_SECONDS + 0.1)
    codes = [status_of(f"{url}/api/v1/goals?probe=throttle", headers) for _ in range(20)]
    # Both workers must have refused, or the test proves nothing: the kernel
    # hands each new connection to whichever worker accepts first, often the
    # same one many times in a row.
    for _ in range(60):
        seen = workers_seen()
        if len(seen) == 2 and all(429 in statuses for statuses in seen.values()):
            break
        time.sleep(0.1)
        codes.append(status_of(f"{url}/api/v1/goals?probe=throttle", headers))
    assert len(workers_seen()) == 2, workers_seen()
    # Earlier tests in this module may have used part of the allowance.
    first = codes.index(429)
    assert first <= 6 and codes[:first] == [401] * first
    assert set(codes[first:]) == {429}
    assert all(429 in statuses for statuses in workers_seen().values())


def test_var_and_its_files_are_the_service_users_alone(var, web):
    url, _, _ = web
    status_of(f"{url}/api/v1/health")
    assert mode(var) == 0o700
    files = {p.name: mode(p) for p in var.iterdir() if not p.is_dir()}
    assert {"ledger.sqlite3", "ledger.sqlite3-wal", "ledger.sqlite3-shm", "secret_key"} \
        <= set(files), files
    assert all(m & 0o077 == 0 for m in files.values()), {n: oct(m) for n, m in files.items()}
    # gunicorn's control socket is per instance (named after its port), in var/.
    assert any(re.fullmatch(r"gunicorn-\d+\.ctl", name) for name in files)


def test_world_readable_files_of_an_older_version_are_narrowed(tmp_path):
    var = tmp_path / "var"
    (var / "runs").mkdir(parents=True)
    var.chmod(0o755)
    (var / "runs").chmod(0o755)
    for name in ("ledger.sqlite3", "ledger.sqlite3-wal", "secret_key", "runs/g-1.log"):
        (var / name).write_text("x" * 60 if name == "secret_key" else "")
        (var / name).chmod(0o644)
    subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT,
                   env=environment(var), check=True, timeout=60)
    assert mode(var) == 0o700 and mode(var / "runs") == 0o700
    for name in ("ledger.sqlite3", "ledger.sqlite3-wal", "secret_key", "runs/g-1.log"):
        assert mode(var / name) == 0o600, name


def test_postgres_refuses_to_start_without_an_explicit_secret_key(tmp_path):
    def setup(**extra: str) -> subprocess.CompletedProcess:
        # Settings only: no connection is opened, so no server is needed.
        return subprocess.run([sys.executable, "-c", "import django; django.setup()"],
                              cwd=ROOT, env=environment(tmp_path / "var", **extra),
                              capture_output=True, text=True, timeout=60, check=False)

    refused = setup(DATABASE_URL="postgres://ledger@127.0.0.1:5432/ledger")
    assert refused.returncode != 0
    assert "SECRET_KEY must be set when DATABASE_URL is" in refused.stderr
    assert not (tmp_path / "var" / "secret_key").exists()
    assert setup(DATABASE_URL="postgres://ledger@127.0.0.1:5432/ledger",
                 SECRET_KEY="shared-by-every-process-" + "k" * 40).returncode == 0
    assert setup().returncode == 0  # SQLite: one host, a key generated under var/


def our_processes(run: str) -> list[int]:
    """Live processes whose environment carries this run's marker."""
    found = []
    marker = f"WAKELEDGER_TEST_RUN={run}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
                if state != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_make_runs_processes_all_exit_soon_after_a_signal(var, tmp_path, signum):
    """The Procfile under `make run`'s supervisor (ledger/project/run.py, its
    setup skipped: var/ is migrated); a signal to it (Ctrl-C in the terminal,
    or SIGTERM from a process manager) stops everything: the cluster says it
    has stopped, nothing is left behind."""
    port, run = free_port(), uuid.uuid4().hex
    log_path = tmp_path / "run.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen([sys.executable, "-m", "ledger.project.run", "--no-setup",
                                   "--port", str(port)], cwd=ROOT,
                                  env=environment(var, WAKELEDGER_TEST_RUN=run), stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_serving(f"http://127.0.0.1:{port}", server)
        deadline = time.monotonic() + 60
        while "] running." not in log_path.read_text():
            assert time.monotonic() < deadline, log_path.read_text()[-2000:]
            time.sleep(0.2)
        assert len(our_processes(run)) >= 7  # run.py, gunicorn master + 2, launcher, cluster…

        started = time.monotonic()
        server.send_signal(signum)
        server.wait(timeout=30)
        while our_processes(run) and time.monotonic() - started < 30:
            time.sleep(0.1)
        elapsed = time.monotonic() - started
        output = log_path.read_text()
        assert not our_processes(run), output[-3000:]
        assert "has stopped." in output, output[-3000:]  # the cluster stopped, not killed
        # No bound on the time it took: the 30 s deadline above, with "has
        # stopped." (the cluster was not killed), is the behaviour.
        print(f"all processes gone {elapsed:.1f} s after {signal.Signals(signum).name}")
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
        for pid in our_processes(run):
            os.kill(pid, signal.SIGKILL)


def test_a_killed_launcher_does_not_leave_the_cluster_running(var, tmp_path):
    """SIGKILL cannot be passed on; the kernel's parent-death signal stops the
    cluster, which runs in its own session that no process manager watches."""
    run = uuid.uuid4().hex
    log_path = tmp_path / "scheduler.log"
    with open(log_path, "wb") as log:
        launcher = subprocess.Popen([sys.executable, "manage.py", "scheduler"], cwd=ROOT,
                                    env=environment(var, WAKELEDGER_TEST_RUN=run), stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while "] running." not in log_path.read_text():
            assert time.monotonic() < deadline, log_path.read_text()[-2000:]
            time.sleep(0.2)
        launcher.kill()
        launcher.wait(timeout=10)
        deadline = time.monotonic() + 20
        while our_processes(run) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not our_processes(run)
        assert "has stopped." in log_path.read_text()
    finally:
        for pid in our_processes(run):
            os.kill(pid, signal.SIGKILL)
