"""How far a request travels through the project: modules and functions per path.

    python bench/trace.py [--quick]

Three paths, each traced in-process with ``sys.setprofile`` on a throwaway
SQLite database, counting only the project's own code (``ledger``, ``api``,
``scheduling``; not Django, DRF, django-q2 or the standard library):

- a keyed checkpoint: ``POST /api/v1/goals/{id}/checkpoints`` with an
  ``Idempotency-Key`` (as the CLI always sends), releasing the lease and
  asking for a wake, through Django's test client and the real middleware;
- a scheduled wake: ``scheduling.tasks.fire_watchdog``, what a qcluster
  worker runs when a goal's internal watchdog slot is due;
- the pull that resumes it: the agent's ``POST /api/v1/goals/{id}/lease``.

Each row's value is the number of project modules the path entered (the
figure the house redesign aims to bring to 20 or fewer for the checkpoint);
the functions are printed beside it. Counts, not times: the same on any
machine for the same code, so one run is enough.
"""

import sys
import tempfile
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, Row, django_setup, emit, parser

PACKAGES = ("ledger", "api", "scheduling")


def traced(call: Callable[[], Any]) -> tuple[Any, set[str], set[tuple[str, str]]]:
    """Run ``call`` once under a profiler; answer its result, the project
    modules it entered and the project functions it called."""
    roots = tuple(str(ROOT / p) + "/" for p in PACKAGES)
    modules: set[str] = set()
    functions: set[tuple[str, str]] = set()

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event != "call":
            return
        name = frame.f_code.co_filename
        if name.startswith(roots) and "/migrations/" not in name:
            relative = name[len(str(ROOT)) + 1:]
            modules.add(relative)
            functions.add((relative, frame.f_code.co_qualname))

    sys.setprofile(profile)
    try:
        result = call()
    finally:
        sys.setprofile(None)
    return result, modules, functions


def paths() -> list[tuple[str, set[str], set[tuple[str, str]]]]:
    from django.test import Client

    from ledger.access import accounts
    from ledger.domain.events import iso
    from ledger.eventstore import clock, store
    from ledger.operators.commands.accounts import ensure_user
    from scheduling.tasks import fire_watchdog

    token = accounts.issue_token(ensure_user("trace-agent", "agent"))
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_HOST="127.0.0.1")

    def post(path: str, body: dict, key: str | None = None) -> dict:
        headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
        answer = client.post(f"/api/v1/{path}", body, content_type="application/json",
                             **headers)
        assert answer.status_code < 300, (path, answer.status_code, answer.content[:300])
        return answer.json()

    started = post("goals", {"workspace": "/trace/one", "goal_key": "trace",
                             "objective": "trace one request",
                             "next_actions": ["write the first step"]})
    goal_id = started["goal"]["id"]
    lease = {"token": started["lease"]["token"], "generation": started["lease"]["generation"]}
    post(f"goals/{goal_id}/watchdog", {"lease": lease})
    # Warm every path once on another goal, so imports and first-use caches
    # are not counted as the request's own work.
    other = post("goals", {"workspace": "/trace/warm", "goal_key": "trace",
                           "objective": "warm up", "next_actions": ["a step"]})
    other_lease = {"token": other["lease"]["token"],
                   "generation": other["lease"]["generation"]}
    post(f"goals/{other['goal']['id']}/checkpoints",
         {"lease": other_lease, "current_step": "warm", "progress_pct": 10,
          "next_actions": ["next"], "release_lease": True,
          "wake": {"in_seconds": 600, "reason": "scheduled_progress"}}, key=str(uuid.uuid4()))

    rows = []
    _, modules, functions = traced(lambda: post(
        f"goals/{goal_id}/checkpoints",
        {"lease": lease, "current_step": "the first step is done", "progress_pct": 20,
         "next_actions": ["the second step"], "release_lease": True,
         "wake": {"in_seconds": 600, "reason": "scheduled_progress"}},
        key=str(uuid.uuid4())))
    rows.append(("keyed checkpoint (POST …/checkpoints, release and wake)", modules, functions))

    due = iso(store.load(goal_id).watchdog.next_due_at)
    later = datetime.now(UTC) + timedelta(hours=2)
    with clock.use(lambda: later):
        outcome, modules, functions = traced(lambda: fire_watchdog(goal_id, due))
    assert outcome in {"ready_for_pull", "recurring_acquired"}, outcome
    rows.append(("scheduled wake (scheduling.tasks.fire_watchdog)", modules, functions))

    with clock.use(lambda: later):
        pulled, modules, functions = traced(lambda: post(f"goals/{goal_id}/lease", {}))
    assert pulled["acquired"], pulled
    rows.append(("the pull that resumes it (POST …/lease)", modules, functions))
    return rows


def main() -> None:
    args = parser(__doc__).parse_args()
    with tempfile.TemporaryDirectory(prefix="wakeledger-trace-") as var_dir:
        django_setup(var_dir)
        measured = paths()
    rows = []
    for name, modules, functions in measured:
        print(f"{name}: {len(modules)} modules, {len(functions)} functions", file=sys.stderr)
        rows.append(Row(name=f"trace: {name}", value=len(modules), unit="modules",
                        baseline="project functions called", baseline_value=len(functions),
                        ratio=None, p50_ms=None, p99_ms=None, n=1, reps=1))
    emit(rows, args.out)


if __name__ == "__main__":
    main()
