"""Run a command against a throwaway PostgreSQL server.

    python tests/postgres.py python -m pytest ...

Starts a server from the machine's PostgreSQL binaries (/usr/lib/postgresql/*/bin,
or WAKELEDGER_PG_BINDIR) in a temporary data directory on a free loopback
port, runs the command with DATABASE_URL pointing at it, then stops the server
and removes the directory. PostgreSQL refuses to run as root, so as root the
server runs as the `postgres` system user.

Without binaries it prints why and exits 0, unless WAKELEDGER_REQUIRE_POSTGRES=1,
which makes that a failure (CI sets it).
"""

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit


def find_bindir() -> Path | None:
    configured = os.environ.get("WAKELEDGER_PG_BINDIR")
    candidates = [configured] if configured else sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
        reverse=True,
    )
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").exists():
            return Path(candidate)
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def server(bindir: Path, *, durable: bool = False) -> Iterator[str]:
    """A throwaway PostgreSQL on a free loopback port; yields its URL. The test
    runs' server has durability off (it lives for one run); the benchmarks'
    (``durable=True``) keeps PostgreSQL's defaults, so commits cost what they
    cost in production."""
    root = Path(tempfile.mkdtemp(prefix="wakeledger-pg-"))
    data = root / "data"
    as_user: list[str] = []
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(root, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    port = free_port()

    def run(*args: str) -> None:
        subprocess.run([*as_user, *args], check=True, stdout=subprocess.DEVNULL)

    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
            "--encoding=UTF8", *(() if durable else ("--no-sync",)))
        options = (f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={root} "
                   + ("-c max_connections=100" if durable else
                      "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                      "-c max_connections=200"))
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"),
            "-o", options, "-w", "-t", "60", "start")
        try:
            run(str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
                "wakeledger")
            yield f"postgres://postgres@127.0.0.1:{port}/wakeledger"
        finally:
            run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast" if durable else "immediate",
                "-w", "stop")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def pgbouncer(upstream: str, *, pool_size: int = 4) -> Iterator[str | None]:
    """A throwaway PgBouncer in transaction pooling in front of ``upstream``
    (a URL ``server`` yielded); yields its own URL, or None without a
    ``pgbouncer`` binary (Debian's package, ``make tools``). Every client
    transaction takes whichever of ``pool_size`` server connections is free,
    as behind a managed PostgreSQL's pooler. As root it runs as `postgres`
    (PgBouncer refuses root)."""
    binary = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer"
                                           if Path("/usr/sbin/pgbouncer").exists() else None)
    if binary is None:
        yield None
        return
    parts = urlsplit(upstream)
    root = Path(tempfile.mkdtemp(prefix="wakeledger-pgbouncer-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(root, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    (root / "users.txt").write_text(f'"{parts.username}" ""\n')
    (root / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"{parts.path.lstrip('/')} = host={parts.hostname} port={parts.port} "
        f"dbname={parts.path.lstrip('/')} user={parts.username}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {root / 'users.txt'}\n"
        f"pool_mode = transaction\ndefault_pool_size = {pool_size}\n"
        "max_client_conn = 200\n"
        f"logfile = {root / 'pgbouncer.log'}\npidfile = {root / 'pgbouncer.pid'}\n")
    for path in root.iterdir():
        os.chmod(path, 0o644)
    process = subprocess.Popen([*as_user, binary, str(root / "pgbouncer.ini")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        for _ in range(200):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.1):
                break
            if process.poll() is not None:
                raise RuntimeError("pgbouncer did not start: "
                                   + (root / "pgbouncer.log").read_text(errors="replace")[-500:])
            time.sleep(0.05)
        yield f"postgres://{parts.username}@127.0.0.1:{port}{parts.path}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    bindir = find_bindir()
    if bindir is None:
        message = "PostgreSQL binaries not found (/usr/lib/postgresql/*/bin)"
        if os.environ.get("WAKELEDGER_REQUIRE_POSTGRES") == "1":
            print(f"FAILED: {message}, and WAKELEDGER_REQUIRE_POSTGRES=1.", file=sys.stderr)
            return 1
        print(f"SKIPPED the PostgreSQL half of the suite: {message}.", file=sys.stderr)
        return 0
    with server(bindir) as url:
        print(f"PostgreSQL {bindir.parent.name} started for the tests ({url})", flush=True)
        # A PostgreSQL deployment must set SECRET_KEY (ledger/project/settings.py):
        # one for the run, shared by every process the tests start.
        key = os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50)
        return subprocess.call(argv, env={**os.environ, "DATABASE_URL": url, "SECRET_KEY": key})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
