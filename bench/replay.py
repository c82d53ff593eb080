"""Replay throughput and peak memory, against a raw cursor scan + json.loads.

    python bench/replay.py [--quick] [--goals N] [--long M]

Seeds a temporary SQLite database (bench/seed.py: one goal through the
store, copied in SQL) with many goals of 100 events and one long goal, then
times ``projection.replay`` (fold every goal's events and diff against its
projection) against a raw ``sqlite3`` scan of the same rows in the same order
with ``json.loads`` of each payload, in interleaved rounds.

Peak memory is Python's (tracemalloc) during an untimed replay, at two
history sizes: the row's value is the peak at the larger, its baseline the
peak at a smaller one: for many goals, five batches (projection.BATCH goals
each) against one; for one goal, a tenth of its events but at least two
chunks (projection.CHUNK), below which memory grows by design. A ratio near
1.0x means memory stays flat as the history grows.
"""

import gc
import json
import sqlite3
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Row, django_setup, emit, interleaved, parser, reps_of


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--goals", type=int, default=None, help="goals of 100 events")
    p.add_argument("--long", type=int, default=None, help="events of the long goal")
    args = p.parse_args()
    reps = reps_of(args)
    goals = args.goals or (200 if args.quick else 2_000)
    long_events = args.long or (10_000 if args.quick else 200_000)
    with tempfile.TemporaryDirectory(prefix="wakeledger-bench-") as tmp:
        django_setup(tmp)
        from django.db import connection

        from bench import seed
        from ledger.eventstore import projection

        started = time.perf_counter()
        source = seed.template(100)
        many = [source, *seed.clone_goals(source, goals - 1)]
        long_id = seed.long_goal(source, long_events, fix=True)
        # Memory baselines: a tenth of the history, but at least one batch of
        # goals / two chunks of events (below that, memory grows by design).
        short_events = min(long_events // 2, max(long_events // 10, 2 * projection.CHUNK))
        # tracemalloc triples replay's time: the many-goals peak is taken over
        # five batches against one, which already shows whether it grows.
        few_goals = min(goals // 2, projection.BATCH)
        most_goals = min(goals, 5 * few_goals)
        short_id = seed.long_goal(source, short_events, fix=True)
        print(f"seeded {goals} x 100 + {long_events} + {short_events} events in "
              f"{time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
        connection.close()

        raw = sqlite3.connect(Path(tmp) / "ledger.sqlite3")

        def raw_scan(ids: list[str]) -> int:
            # Same rows, same order, same index as replay's streaming query.
            count = 0
            for start in range(0, len(ids), projection.BATCH):
                batch = [i.replace("-", "") for i in ids[start:start + projection.BATCH]]
                cur = raw.execute(
                    "SELECT goal_id, kind, data, recorded_at, hash FROM ledger_event "
                    f"WHERE goal_id IN ({','.join('?' * len(batch))}) "
                    "ORDER BY goal_id, seq", batch)
                for row in cur:
                    json.loads(row[2])
                    count += 1
            return count

        def rate(fn, ids: list[str], events: int):  # type: ignore[no-untyped-def]
            def run() -> float:
                t0 = time.perf_counter()
                fn(ids)
                return events / (time.perf_counter() - t0)
            return run

        def ours(ids: list[str]) -> None:
            differing = sum(1 for _ in projection.replay(ids))
            assert differing == 0, f"{differing} goals differ from their events"

        assert raw_scan(many) == goals * 100
        rows = []
        for label, ids, events in (
                (f"replay {goals:,} goals x 100 events", many, goals * 100),
                (f"replay one goal of {long_events:,} events", [long_id], long_events)):
            value, base, ratio = interleaved(reps, rate(ours, ids, events),
                                             rate(raw_scan, ids, events))
            rows.append(Row(name=label, value=value, unit="events/s",
                            baseline="raw sqlite3 scan + json.loads, same rows",
                            baseline_value=base, ratio=ratio, p50_ms=None, p99_ms=None,
                            n=events, reps=reps))

        def peak(ids: list[str]) -> float:
            gc.collect()
            tracemalloc.start()
            ours(ids)
            _, top = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            return top / 1e6

        for label, big, small, events, smaller in (
                (f"replay peak memory, {most_goals:,} goals x 100 events", many[:most_goals],
                 many[:few_goals], most_goals * 100, f"{few_goals:,} goals"),
                (f"replay peak memory, one goal of {long_events:,} events", [long_id],
                 [short_id], long_events, f"one goal of {short_events:,} events")):
            large, little = peak(big), peak(small)
            rows.append(Row(name=label, value=large, unit="MB (tracemalloc peak)",
                            baseline=f"same, {smaller}", baseline_value=little,
                            ratio=large / little, p50_ms=None, p99_ms=None, n=events, reps=1))
        raw.close()
    emit(rows, args.out)


if __name__ == "__main__":
    main()
