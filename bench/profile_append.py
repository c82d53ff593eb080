"""What one append costs, in numbers the machine's load does not move.

    python bench/profile_append.py [--database sqlite|postgres] [--commands N]

``store.execute`` of the append bench's checkpoint (bench/append.py), N times
on one goal, and per command:

- SQLite: WAL frames per commit, by the b-tree each page belongs to (the
  WAL's frame headers name the page, ``dbstat`` its table or index), and the
  statements SQLite ran (its trace callback);
- PostgreSQL (a throwaway server, bench/pg.py): WAL bytes
  (``pg_current_wal_lsn``) and round trips (messages that wait for the
  server, counted in libpq's trace);
- both: CPU µs per command (process time, with SQLite's fsync off so the
  disk's flushes do not count) and the same under cProfile.

Ratios against peers are bench/append.py's; this says where they come from.
"""

import argparse
import cProfile
import os
import pstats
import struct
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import django_setup


def sqlite_shape(tmp: str, run: "object", n: int) -> None:
    from django.db import connection

    raw = connection.connection
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw.execute("PRAGMA wal_autocheckpoint=0")  # keep every frame of the run
    statements: list[str] = []
    raw.set_trace_callback(statements.append)
    run(n)
    raw.set_trace_callback(None)
    wal = (Path(tmp) / "ledger.sqlite3-wal").read_bytes()
    page_size = raw.execute("PRAGMA page_size").fetchone()[0]
    pages = [struct.unpack(">I", wal[offset:offset + 4])[0]
             for offset in range(32, len(wal) - 23, 24 + page_size)]
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    names = dict(raw.execute("SELECT pageno, name FROM dbstat"))
    print(f"WAL frames per commit: {len(pages) / n:.2f}")
    for name, count in Counter(names.get(p, "?") for p in pages).most_common():
        print(f"  {count / n:5.2f}  {name}")
    print(f"statements per command: {len(statements) / n:.2f}")
    for text, count in Counter(s.split(" WHERE")[0].split(" SET")[0][:70]
                               for s in statements).most_common():
        print(f"  {count / n:5.2f}  {text}")
    raw.execute("PRAGMA synchronous=OFF")


def postgres_shape(tmp: str, run: "object", n: int) -> None:
    from django.db import connection
    from psycopg import pq

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()")
        start = cursor.fetchone()[0]
    run(n)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", [start])
        print(f"WAL bytes per command: {cursor.fetchone()[0] / n:,.0f}")
    pgconn = connection.connection.pgconn
    trace = Path(tmp) / "libpq.trace"
    fd = os.open(trace, os.O_WRONLY | os.O_CREAT)
    pgconn.trace(fd)
    pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
    run(100)
    pgconn.untrace()
    os.close(fd)
    sent = [line.split("\t")[2].split(" ")[0] for line in trace.read_text().splitlines()
            if line.startswith("F\t")]
    # A simple Query, or a Sync closing an extended-protocol batch, waits for the server.
    trips = sent.count("Query") + sent.count("Sync")
    print(f"round trips per command: {trips / 100:.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--commands", type=int, default=2000)
    args = p.parse_args()
    n = args.commands
    with tempfile.TemporaryDirectory(prefix="wakeledger-bench-") as tmp, ExitStack() as stack:
        url = None
        if args.database == "postgres":
            from bench.pg import durable_server

            url = stack.enter_context(durable_server())
            if url is None:
                sys.exit("no PostgreSQL binaries (/usr/lib/postgresql/*/bin)")
        django_setup(tmp, url)
        from django.db import connection

        from bench.append import Ours

        ours = Ours()
        ours.run(200)  # warm: caches, page splits of a new table
        (sqlite_shape if args.database == "sqlite" else postgres_shape)(tmp, ours.run, n)
        started = time.process_time()
        ours.run(n)
        print(f"CPU µs per command: {(time.process_time() - started) / n * 1e6:.0f}"
              + (" (fsync off)" if args.database == "sqlite" else " (client only)"))
        profile = cProfile.Profile()
        profile.enable()
        ours.run(n)
        profile.disable()
        print(f"under cProfile: {pstats.Stats(profile).total_tt / n * 1e6:.0f} µs per command")
        connection.close()


if __name__ == "__main__":
    os.environ.pop("DATABASE_URL", None)
    main()
