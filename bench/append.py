"""Append throughput: our store against a raw SQLite INSERT + COMMIT per event.

    make bench            (or: python bench/append.py [--events N])

Both sides run on a file database in WAL mode with synchronous=FULL, one
committed transaction per event, so they pay the same durability. The raw
side inserts a row shaped like an event into a table with the same unique
(goal, seq) index; ours runs the whole command: lock the goal row, decide,
hash, insert the event, fold and update the projection. A plain Django ORM
version of the same transaction is printed for reference.

Disk flush times wander a lot on a shared machine, so the sides run in
alternating rounds and the report gives medians and the median per-round ratio.
"""

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class RawSQLite:
    def __init__(self, path: Path):
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("""CREATE TABLE event (id INTEGER PRIMARY KEY, goal_id TEXT,
                           seq INTEGER, kind TEXT, data TEXT, actor TEXT, recorded_at TEXT,
                           idempotency_key TEXT, prev_hash TEXT, hash TEXT,
                           UNIQUE (goal_id, seq))""")
        self.goal = uuid.uuid4().hex
        self.seq = 0
        self.data = json.dumps({"current_step": "step", "progress_pct": 10, "completed": [],
                                "next_actions": ["next"], "artifacts": [], "errors": [],
                                "note": ""})

    def run(self, n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            self.seq += 1
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute(
                "INSERT INTO event (goal_id, seq, kind, data, actor, recorded_at, "
                "idempotency_key, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (self.goal, self.seq, "checkpoint.recorded", self.data, "agent-1",
                 datetime.now(UTC).isoformat(), None, "0" * 64, "f" * 64))
            self.db.execute("COMMIT")
        return n / (time.perf_counter() - started)


class Ours:
    def __init__(self) -> None:
        import django

        django.setup()
        from django.core.management import call_command

        from ledger import store
        from ledger.domain import LeaseProof, RecordCheckpoint, RunGoal, StartGoal

        call_command("migrate", verbosity=0)
        self.store = store
        self.goal_id = str(uuid.uuid4())
        token = "0" * 64  # a lease token's digest; the benchmark holds the lease
        store.start(RunGoal(StartGoal(goal_id=self.goal_id, workspace="/bench", goal_key="bench",
                                      objective="benchmark", agent="agent-1"), "agent-1", token),
                    actor="agent-1")
        self.command = RecordCheckpoint(current_step="step", progress_pct=10,
                                        next_actions=("next",), proof=LeaseProof(token, 1))

    def run(self, n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            self.store.execute(self.goal_id, self.command, actor="agent-1")
        return n / (time.perf_counter() - started)

    def run_orm(self, n: int) -> float:
        """The same transaction written the plain ORM way, for reference."""
        from django.db import transaction

        from ledger import clock
        from ledger.models import Event, Goal

        started = time.perf_counter()
        for _ in range(n):
            with transaction.atomic():
                goal = Goal.objects.select_for_update().get(pk=self.goal_id)
                goal.version += 1
                Event.objects.create(goal=goal, seq=goal.version, kind="checkpoint.recorded",
                                     data={"current_step": "step"}, actor="agent-1",
                                     recorded_at=clock.now(), prev_hash=goal.last_hash,
                                     hash="f" * 64)
                goal.save(update_fields=["version", "updated_at"])
        return n / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1000, help="events per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wakeledger-bench-") as tmp:
        os.environ["WAKELEDGER_VAR_DIR"] = tmp
        os.environ["DJANGO_SETTINGS_MODULE"] = "ledger.settings"
        os.environ.pop("DATABASE_URL", None)
        raw, ours = RawSQLite(Path(tmp) / "raw.sqlite3"), Ours()
        raw.run(100), ours.run(100)  # warm up
        rounds = []
        for _ in range(args.rounds):
            rounds.append((raw.run(args.events), ours.run(args.events)))
        orm = ours.run_orm(args.events)
    raw_rate = statistics.median(r for r, _ in rounds)
    store_rate = statistics.median(o for _, o in rounds)
    ratio = statistics.median(o / r for r, o in rounds)
    print(f"{args.rounds} rounds of {args.events} events, SQLite WAL, synchronous=FULL")
    print(f"raw SQLite INSERT+COMMIT:  {raw_rate:8.0f} events/s (median)")
    print(f"ledger store.execute:      {store_rate:8.0f} events/s (median), "
          f"{ratio:.2f}x raw (median of per-round ratios)")
    print(f"plain ORM transaction:     {orm:8.0f} events/s (one round, reference)")


if __name__ == "__main__":
    main()
