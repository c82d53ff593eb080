"""Where a checkpoint's HTTP time goes: cProfile of the request path in process.

    python bench/profile_http.py [--requests N] [--no-key] [--top K]

Posts N checkpoints with a fresh Idempotency-Key each through Django's whole
stack (django.test.Client: middleware, bearer authentication, DRF, the view,
the store) on a temporary SQLite database, under cProfile. Prints the own
time grouped by where the code lives (this project, Django, DRF, the
database driver, ...) and the top functions by cumulative and by own time.
No gunicorn here: its share is the difference between the HTTP rows of
``make bench`` and this per-request time.
"""

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, django_setup
from bench.http_checkpoint import BODY

# (label, file, function): the stages of a checkpoint request worth naming.
STAGES = (
    ("DRF initial(): authentication, permissions, throttles", "rest_framework/views.py",
     "initial"),
    ("bearer token lookup (api/tokens.authenticate)", "api/tokens.py", "authenticate"),
    ("role lookup (ledger/access/accounts.role_of)", "ledger/access/accounts.py", "role_of"),
    ("Idempotency-Key: claiming the key (_claim)", "api/idempotency.py", "_claim"),
    ("Idempotency-Key: recording the answer (_complete)", "api/idempotency.py", "_complete"),
    ("the view (CheckpointsView.post)", "api/views.py", "post"),
    ("goal visibility (api/views.load_goal)", "api/views.py", "load_goal"),
    ("the command (store.execute)", "ledger/eventstore/store.py", "execute"),
    ("request validation (api/views.validated)", "api/views.py", "validated"),
    ("COMMIT (sqlite3, with its fsync)", "~", "<method 'commit' of 'sqlite3.Connection' objects>"),
    ("SQL statements (Django's cursor wrapper)", "~",
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=500)
    p.add_argument("--no-key", action="store_true", help="without Idempotency-Key")
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="wakeledger-bench-") as tmp:
        django_setup(tmp)
        from django.test import Client

        from ledger.access import accounts
        from ledger.operators.commands.accounts import ensure_user

        token = accounts.issue_token(ensure_user("bench-agent", "agent"))
        client = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {token}")
        answer = client.post("/api/v1/goals", {
            "goal_key": "bench", "workspace": "/bench/profile", "objective": "benchmark",
            "policy": {"lease_seconds": 3600}}, content_type="application/json").json()
        url = f"/api/v1/goals/{answer['goal']['id']}/checkpoints"
        body = {**BODY, "lease": {"token": answer["lease"]["token"],
                                  "generation": answer["lease"]["generation"]}}

        def post() -> None:
            headers = {} if args.no_key else {"HTTP_IDEMPOTENCY_KEY": str(uuid.uuid4())}
            response = client.post(url, body, content_type="application/json", **headers)
            assert response.status_code == 201, response.content[:300]

        for _ in range(50):  # warm up
            post()
        started = time.perf_counter()
        for _ in range(args.requests):
            post()
        plain = (time.perf_counter() - started) / args.requests
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.requests):
            post()
        profiler.disable()

    stats = pstats.Stats(profiler)
    total = sum(row[2] for row in stats.stats.values())  # own time
    by_area: dict[str, float] = defaultdict(float)
    for (filename, _, _), (_, _, tottime, _, _) in stats.stats.items():
        by_area[area(filename)] += tottime
    print(f"{args.requests} checkpoints {'without' if args.no_key else 'with'} an "
          f"Idempotency-Key: {plain * 1000:.2f} ms each unprofiled "
          f"({1 / plain:.0f} req/s in one process, no HTTP server)\n")
    print("own time by area (profiled):")
    for name, seconds in sorted(by_area.items(), key=lambda kv: -kv[1]):
        print(f"  {seconds / total:6.1%}  {name}")
    print()
    print("stages (cumulative time, share of the profiled total; calls per request):")
    for label, suffix, function in STAGES:
        for (filename, _, name), (_, calls, _, cumtime, _) in stats.stats.items():
            if filename.endswith(suffix) and (name == function or (
                    function.endswith(" at") and name.startswith(function))):
                print(f"  {cumtime / total:6.1%}  {calls / args.requests:5.2f}  {label}")
                break
    print()
    stats.sort_stats("cumulative").print_stats(args.top)
    stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
