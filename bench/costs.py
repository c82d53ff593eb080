"""What one command costs in work the machine's load does not move.

    python bench/costs.py [--database sqlite|postgres] [--n N]
    valgrind --tool=callgrind --instr-atstart=no python bench/costs.py ...

Two operations, each run N times after a warm-up:

- a keyed checkpoint: ``POST /api/v1/goals/{id}/checkpoints`` with an
  ``Idempotency-Key`` through Django's test client (the middleware, DRF, the
  key's record and the command in one transaction);
- a plain command: bench/append.py's checkpoint through ``store.execute``
  (``caller.run`` where that is the one entry), the append hot path;
- a scheduled claim: django-q2's task function firing a due internal
  watchdog of a goal whose lease was released (bench/scheduler.py's claims).

Per operation: the Python function calls cProfile counts (deterministic for
the same code), and, under callgrind started with ``--instr-atstart=no``, the
machine instructions of the region alone (instrumentation switched on and
the counters zeroed just before it, dumped just after, with
``callgrind_control``). Counts, not times: a busy machine cannot move them.
"""

import cProfile
import gc
import os
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import django_setup, parser

UNDER_VALGRIND = "vgpreload" in Path("/proc/self/maps").read_text()


def calls(run: Callable[[int], None], n: int) -> float:
    profile = cProfile.Profile()
    profile.enable()
    run(n)
    profile.disable()
    return pstats.Stats(profile).total_calls / n


def instructions(run: Callable[[int], None], n: int, out_dir: str, label: str) -> float | None:
    """Instructions per operation, counted by callgrind over ``run(n)`` alone."""
    if not UNDER_VALGRIND:
        return None
    control = shutil.which("callgrind_control") or "callgrind_control"

    def ask(*words: str) -> None:
        subprocess.run([control, *words, str(os.getpid())], check=True,
                       stdout=subprocess.DEVNULL)

    ask("--instr=on")
    ask("--zero")
    time.sleep(0.2)
    ask("--zero")
    run(n)
    before = set(Path(out_dir).iterdir())
    ask(f"--dump={label}")
    ask("--instr=off")
    dumped = [p for p in Path(out_dir).iterdir() if p not in before]
    total = 0
    for path in dumped:
        match = re.search(r"^(?:summary|totals): (\d+)", path.read_text(errors="replace"), re.M)
        total += int(match.group(1)) if match else 0
    return total / n


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--dump-dir", default=os.getcwd(), help="where callgrind writes its dumps")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="wakeledger-costs-") as tmp, ExitStack() as stack:
        url = None
        if args.database == "postgres":
            from bench.pg import durable_server

            url = stack.enter_context(durable_server())
            if url is None:
                sys.exit("no PostgreSQL binaries (/usr/lib/postgresql/*/bin)")
        django_setup(tmp, url)
        measure(args.n, args.database, args.dump_dir)


def measure(n: int, database: str, dump_dir: str) -> None:
    from django.test import Client

    from bench.append import Ours
    from ledger.access import accounts
    from ledger.operators.commands.accounts import ensure_user

    token = accounts.issue_token(ensure_user("costs-agent", "agent"))
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_HOST="127.0.0.1")
    started = client.post("/api/v1/goals", {"workspace": "/costs", "goal_key": "costs",
                                            "objective": "measure a checkpoint",
                                            "next_actions": ["a step"]},
                          content_type="application/json").json()
    goal_id = started["goal"]["id"]
    lease = {"token": started["lease"]["token"], "generation": started["lease"]["generation"]}
    body = {"lease": lease, "current_step": "the first step is done", "progress_pct": 20,
            "next_actions": ["the second step"]}

    def checkpoints(k: int) -> None:
        for _ in range(k):
            answer = client.post(f"/api/v1/goals/{goal_id}/checkpoints", body,
                                 content_type="application/json",
                                 HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
            assert answer.status_code < 300, answer.content[:300]

    ours = Ours()

    def commands(k: int) -> None:
        ours.run(k)

    claims = scheduled_claims(50 + 2 * n)
    for name, run in (("keyed checkpoint (HTTP)", checkpoints), ("plain command", commands),
                      ("scheduled claim", claims)):
        run(50)  # warm: imports, first-use caches, page splits
        # The full collection that the setup's garbage owes, now: left to
        # fall inside one side's region, it added 0.74 M instructions to each
        # of 100 claims in one run and nothing in the next.
        gc.collect()
        per_call = calls(run, n)
        gc.collect()
        per_instr = instructions(run, n, dump_dir, name.split()[0])
        figure = f"{per_instr:,.0f} instructions, " if per_instr is not None else ""
        print(f"{database}: {name}: {figure}{per_call:,.0f} Python calls per operation",
              flush=True)


def scheduled_claims(goals: int) -> Callable[[int], None]:
    """Fires of due internal watchdogs, each on a goal of its own (a claim
    grants its goal's wake: the next fire of it would be another case)."""
    from datetime import UTC, datetime, timedelta

    from bench.scheduler import seed_goals
    from ledger.domain.events import iso
    from ledger.eventstore import clock, store
    from scheduling.tasks import fire_watchdog

    ids = seed_goals(goals)
    due = {goal: iso(store.load(goal).watchdog.next_due_at) for goal in ids}
    later = datetime.now(UTC) + timedelta(hours=25)
    pending = iter(ids)

    def fire(k: int) -> None:
        with clock.use(lambda: later):
            for _ in range(k):
                goal = next(pending)
                assert fire_watchdog(goal, due[goal]) == "ready_for_pull"

    return fire


if __name__ == "__main__":
    os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
