"""What the goals-by-status tallies cost concurrent changes of status (docs/metrics.md).

    python bench/tally_contention.py [--threads 4] [--cycles 40] [--rounds 3]

A durable throwaway PostgreSQL (bench/pg.py: fsync and synchronous commit
on, as in production). Each thread cycles its own goal between ``running``
and ``waiting`` (release the lease, take it again: two changes of status a
cycle); the rounds interleave four variants and print each one's median
status changes a second:

- no goal tallies (their moves switched off: what the store did before);
- one row per (status, reason): every writer queues on ``running`` and
  ``waiting``;
- 16 shards (``tallies.SHARDS``, what the product does);
- 1,024 shards: what is left once writers almost never share a row.

Not part of `make test` or `make bench`: it needs PostgreSQL's binaries and
is a comparison of variants, not a figure with a target.
"""

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import django_setup
from bench.pg import durable_server

VARIANTS = {"no goal tallies": 16, "one row per status": 1, "16 shards": 16,
            "1,024 shards": 1024}


def run(threads: int, cycles: int, label: str) -> float:
    """Status changes a second of ``threads`` writers, each on its own goal."""
    from django.db import connections

    from ledger.domain import AcquireLease, ReleaseLease, RunGoal, StartGoal
    from ledger.eventstore import store
    from tests.factories import new_token, proof_of

    goals = []
    for i in range(threads):
        goal_id = str(uuid.uuid4())
        store.start(RunGoal(StartGoal(goal_id=goal_id, workspace=f"/bench/{label}/{i}",
                                      goal_key="bench", objective="benchmark", agent="agent-1"),
                            "agent-1", new_token()[1]), actor="agent-1")
        goals.append(goal_id)

    def work(goal_id: str) -> None:
        try:
            for _ in range(cycles):
                state = store.load(goal_id)
                store.execute(goal_id, ReleaseLease(proof_of(state)), actor="agent-1")
                store.execute(goal_id, AcquireLease("agent-1", new_token()[1]),
                              actor="agent-1")
        finally:
            connections.close_all()

    workers = [threading.Thread(target=work, args=(goal_id,)) for goal_id in goals]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return 2 * threads * cycles / (time.perf_counter() - started)


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    options.add_argument("--threads", type=int, default=4)
    options.add_argument("--cycles", type=int, default=40)
    options.add_argument("--rounds", type=int, default=3)
    args = options.parse_args()
    with durable_server() as url, tempfile.TemporaryDirectory() as tmp:
        if url is None:
            print("no PostgreSQL binaries here: nothing measured", file=sys.stderr)
            return 0
        django_setup(tmp, url)
        from ledger.eventstore import tallies

        real = tallies.moved
        rates: dict[str, list[float]] = {}
        try:
            for rnd in range(args.rounds):
                for variant, shards in VARIANTS.items():
                    tallies.SHARDS = shards
                    tallies.moved = real if variant != "no goal tallies" else (  # type: ignore[assignment]
                        lambda goal_id, before, after: Counter())
                    rates.setdefault(variant, []).append(
                        run(args.threads, args.cycles, f"{rnd}-{shards}-{variant[0]}"))
        finally:
            tallies.moved, tallies.SHARDS = real, 16  # type: ignore[assignment]
        for variant, found in rates.items():
            print(f"{variant}: median {statistics.median(found):.0f} status changes/s "
                  f"({', '.join(f'{r:.0f}' for r in found)}), {args.threads} writers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
