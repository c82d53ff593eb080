"""A throwaway PostgreSQL server for benchmarks, with durability ON.

tests/postgres.py starts its test server with fsync=off and
synchronous_commit=off: right for tests, wrong for a benchmark that compares
commit rates. ``durable_server`` asks the same helper for PostgreSQL's
defaults (fsync, synchronous_commit, full_page_writes on), so a COMMIT waits
for the WAL flush exactly as in production.
"""

import contextlib
import sys
import tempfile
from collections.abc import Iterator

from bench.common import django_setup
from tests.postgres import find_bindir, server


@contextlib.contextmanager
def durable_server() -> Iterator[str | None]:
    """Yield a DATABASE_URL, or None when no PostgreSQL binaries are here."""
    bindir = find_bindir()
    if bindir is None:
        yield None
        return
    with server(bindir, durable=True) as url:
        yield url


@contextlib.contextmanager
def django_on_durable_server() -> Iterator[str | None]:
    """Django set up on a durable throwaway server (a benchmark's PostgreSQL
    rows); None, said once on stderr, when no PostgreSQL binaries are here."""
    with tempfile.TemporaryDirectory(prefix="wakeledger-bench-") as tmp, \
            durable_server() as url:
        if url is None:
            print("no PostgreSQL binaries (/usr/lib/postgresql/*/bin): postgres rows skipped",
                  file=sys.stderr)
        else:
            django_setup(tmp, url)
        yield url
