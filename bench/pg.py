"""A throwaway PostgreSQL server for benchmarks, with durability ON.

tests/postgres.py starts its server with fsync=off and synchronous_commit=off:
right for tests, wrong for a benchmark that compares commit rates. This one
keeps PostgreSQL's defaults (fsync, synchronous_commit, full_page_writes on),
so a COMMIT waits for the WAL flush exactly as in production.
"""

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bench.common import ROOT  # noqa: F401  (puts the project on sys.path)
from tests.postgres import find_bindir, free_port


@contextlib.contextmanager
def durable_server() -> Iterator[str | None]:
    """Yield a DATABASE_URL, or None when no PostgreSQL binaries are here."""
    bindir = find_bindir()
    if bindir is None:
        yield None
        return
    root = Path(tempfile.mkdtemp(prefix="wakeledger-bench-pg-"))
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
            "--encoding=UTF8")
        options = (f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={root} "
                   "-c max_connections=100")
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"),
            "-o", options, "-w", "-t", "60", "start")
        try:
            run(str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
                "wakeledger")
            yield f"postgres://postgres@127.0.0.1:{port}/wakeledger"
        finally:
            run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
    finally:
        shutil.rmtree(root, ignore_errors=True)
