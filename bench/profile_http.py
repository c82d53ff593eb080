"""Where a checkpoint's HTTP time goes: cProfile of the request path in process.

    python bench/profile_http.py [--requests N] [--no-key] [--bare] [--top K]

Posts N checkpoints with a fresh Idempotency-Key each through Django's WSGI
handler, called the way gunicorn's sync worker calls it (an environ in, the
body iterated, ``close()``: the request_started and request_finished signals
included), on a temporary SQLite database with bench/settings.py. ``--bare``
posts the same body to the bare DRF insert view (bench/bare.py) instead: the
baseline's own share. Prints the CPU time per request (``process_time``:
what a busy machine does not inflate, and an fsync's wait does not count),
the SQL statements per request, the own time grouped by where the code lives
(this project, Django, DRF, the database driver, ...) and the top functions
by cumulative and by own time. No gunicorn here: its share is the difference
between the HTTP rows of ``make bench`` and this per-request time.
"""

import argparse
import cProfile
import io
import json
import pstats
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, django_setup
from bench.http_checkpoint import BODY

BATCH = 50

# (label, file, function): the stages of a checkpoint request worth naming.
STAGES = (
    ("middleware and Django's handler (WSGIHandler.__call__)", "django/core/handlers/wsgi.py",
     "__call__"),
    ("DRF initial(): authentication, permissions, throttles", "rest_framework/views.py",
     "initial"),
    ("bearer token lookup (api/auth.authenticate)", "api/auth.py", "authenticate"),
    ("request validation (api/serializers.validated)", "api/serializers/fields.py",
     "validated"),
    ("Idempotency-Key: the body's fingerprint", "api/idempotency.py", "fingerprint"),
    ("Idempotency-Key: the key with its answer (_complete)", "api/idempotency.py",
     "_complete"),
    ("the view (CheckpointsView.post)", "api/views/work.py", "post"),
    ("the command (store.execute)", "ledger/eventstore/store.py", "execute"),
    ("the answer's rendering (Response.rendered_content)", "rest_framework/response.py",
     "rendered_content"),
    ("COMMIT (sqlite3, with its fsync)", "~", "<method 'commit' of 'sqlite3.Connection' objects>"),
    ("SQL statements (the driver's execute)", "~",
     "<function SQLiteCursorWrapper.execute at"),
)


def area(filename: str) -> str:
    if filename.startswith(str(ROOT)) and "/.venv/" not in filename:
        rel = Path(filename).relative_to(ROOT).parts
        return f"project: {rel[0]}/" if len(rel) > 1 else "project"
    for marker, name in (("/django/db/", "django ORM"), ("/django/", "django (other)"),
                         ("/rest_framework/", "DRF"), ("/django_q/", "django-q2"),
                         ("/sqlite3/", "sqlite3 module"), ("/json/", "json"),
                         ("/drf_spectacular/", "drf-spectacular")):
        if marker in filename:
            return name
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins (C: sqlite3 calls, hashing, ...)"
    return "stdlib/other"


def wsgi_poster(token: str) -> Any:
    """``post(path, body, headers) -> (status, body)`` through WSGIHandler, as
    gunicorn's sync worker calls it."""
    from django.core.handlers.wsgi import WSGIHandler

    handler = WSGIHandler()

    def post(path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, bytes]:
        raw = json.dumps(body).encode()
        environ = {
            "REQUEST_METHOD": "POST", "PATH_INFO": path, "SCRIPT_NAME": "", "QUERY_STRING": "",
            "SERVER_NAME": "localhost", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1", "HTTP_HOST": "localhost",
            "HTTP_AUTHORIZATION": f"Bearer {token}", "HTTP_USER_AGENT": "wakeledger-bench",
            "HTTP_ACCEPT": "*/*", "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(raw)), "wsgi.input": io.BytesIO(raw),
            "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr, "wsgi.version": (1, 0),
            "wsgi.multithread": False, "wsgi.multiprocess": True, "wsgi.run_once": False,
            **{"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()},
        }
        status: list[str] = []
        result = handler(environ, lambda s, h, *_: status.append(s))
        try:
            content = b"".join(result)
        finally:
            result.close()
        return int(status[0].split()[0]), content

    return post


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--no-key", action="store_true", help="without Idempotency-Key")
    p.add_argument("--bare", action="store_true", help="the bare DRF insert view instead")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--no-fsync", action="store_true",
                   help="PRAGMA synchronous=OFF: the CPU figure without the disk's share "
                        "(the code path is the same; only the COMMIT's fsync goes)")
    p.add_argument("--save", help="write the profile's stats to this file (pstats)")
    p.add_argument("--settings", default="bench.settings",
                   help="a settings module importing bench.settings (to try a change)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="wakeledger-bench-") as tmp:
        django_setup(tmp, settings=args.settings)
        from django.db import connection

        from bench.bare import CREATE
        from ledger.access import accounts
        from ledger.operators.commands.accounts import ensure_user

        with connection.cursor() as cursor:
            cursor.execute(CREATE)
            if args.no_fsync:  # the connection is kept (CONN_MAX_AGE), so is this
                cursor.execute("PRAGMA synchronous=OFF")
        token = accounts.issue_token(ensure_user("bench-agent", "agent"))
        post = wsgi_poster(token)
        _, content = post("/api/v1/goals", {
            "goal_key": "bench", "workspace": "/bench/profile", "objective": "benchmark",
            "policy": {"lease_seconds": 3600}}, {})
        answer = json.loads(content)
        url = "/bench/bare" if args.bare else f"/api/v1/goals/{answer['goal']['id']}/checkpoints"
        body = {**BODY, "lease": {"token": answer["lease"]["token"],
                                  "generation": answer["lease"]["generation"]}}
        statements = [0]

        def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            statements[0] += 1
            return execute(sql, params, many, context)

        def one() -> None:
            headers = {} if args.no_key else {"Idempotency-Key": str(uuid.uuid4())}
            status, content = post(url, body, headers)
            assert status == 201, content[:300]

        for _ in range(50):  # warm up
            one()
        with connection.execute_wrapper(count):
            one()
        # COMMIT is the driver's method, not a statement through the cursor.
        per_request = statements[0]
        # CPU per request in batches: another process on the machine only ever
        # adds to a batch (caches, frequency), so the quickest batch is the
        # figure that compares across runs; the median is printed beside it.
        batches: list[float] = []
        started = time.perf_counter()
        for _ in range(max(1, args.requests // BATCH)):
            cpu = time.process_time()
            for _ in range(BATCH):
                one()
            batches.append((time.process_time() - cpu) / BATCH)
        plain = (time.perf_counter() - started) / (len(batches) * BATCH)
        batches.sort()
        cpu, cpu_median = batches[0], batches[len(batches) // 2]
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.requests):
            one()
        profiler.disable()

    stats = pstats.Stats(profiler)
    if args.save:
        stats.dump_stats(args.save)
    total = sum(row[2] for row in stats.stats.values())  # own time
    by_area: dict[str, float] = defaultdict(float)
    for (filename, _, _), (_, _, tottime, _, _) in stats.stats.items():
        by_area[area(filename)] += tottime
    what = "bare inserts" if args.bare else "checkpoints"
    keyed = "" if args.bare else (" without an Idempotency-Key" if args.no_key
                                  else " with an Idempotency-Key")
    print(f"{args.requests} {what}{keyed}: {plain * 1000:.3f} ms each unprofiled, "
          f"{cpu * 1e6:.0f} µs of CPU each (quickest batch of {BATCH}; median "
          f"{cpu_median * 1e6:.0f}) ({1 / plain:.0f} req/s in one process, "
          f"no HTTP server); {per_request} SQL statements through Django's cursor "
          f"(the store's go to the driver: see the stages) + COMMIT; "
          f"profiled {total / args.requests * 1000:.3f} ms each, "
          f"{stats.total_calls / args.requests:.0f} function calls each"
          f"{' (no fsync)' if args.no_fsync else ''}\n")
    print("own time by area (profiled):")
    for name, seconds in sorted(by_area.items(), key=lambda kv: -kv[1]):
        print(f"  {seconds / total:6.1%}  {name}")
    print()
    print("stages (cumulative time, share of the profiled total, µs per request; "
          "calls per request):")
    for label, suffix, function in STAGES:
        for (filename, _, name), (_, calls, _, cumtime, _) in stats.stats.items():
            if filename.endswith(suffix) and (name == function or (
                    function.endswith(" at") and name.startswith(function))):
                print(f"  {cumtime / total:6.1%}  {cumtime / args.requests * 1e6:6.0f} µs  "
                      f"{calls / args.requests:5.2f}  {label}")
                break
    print()
    stats.sort_stats("cumulative").print_stats(args.top)
    stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
