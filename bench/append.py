"""Append throughput on SQLite and PostgreSQL, against raw INSERT + COMMIT; storage per event.

    make bench            (or: python bench/append.py [--quick] [--events N])

Both sides pay the same durability and commit once per event. SQLite: a file
database in WAL mode with synchronous=FULL. PostgreSQL: a throwaway server
started from the machine's binaries with its default durability (fsync and
synchronous_commit on, bench/pg.py). The raw side inserts a row shaped like
our event, with the same ~300-byte JSON payload, into a table with the same
unique (goal, seq) index; ours runs the whole command through
``store.execute``: lock the goal row, decide, hash, insert the event, fold and
update the projection. The floor (bench/floor.py) sends that command's own
statements and nothing else, on the same ledger database: its rows say how
much of our time is above the SQL, and where the SQL alone stands against
the raw insert and ``eventsourcing``. Each side's CPU per operation goes to
stderr.

The storage rows divide the event table's bytes (with its indexes) by its rows,
ours against the raw table, after both sides' appends.
"""

import json
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    Row,
    database_main,
    django_setup,
    median,
    percentile_ms,
    rotating_rounds,
    round_ratio,
)
from bench.floor import Cpu, FloorPostgres, FloorSQLite, prepare

RAW_TABLE = """CREATE TABLE bench_raw_event (id {pk}, goal_id TEXT NOT NULL,
    seq INTEGER NOT NULL, kind TEXT NOT NULL, data {json} NOT NULL, actor TEXT NOT NULL,
    recorded_at {ts} NOT NULL, idempotency_key TEXT, prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL, UNIQUE (goal_id, seq))"""


class Ours:
    """One ~300-byte checkpoint per transaction, through the use cases' one
    entry (``caller.run``: the transaction, the store, the follow-up)."""

    def __init__(self, key: str = "bench") -> None:
        """``key``: the goal's workspace and key (one goal per key and agent)."""
        from ledger.domain import LeaseProof, RecordCheckpoint, RunGoal, StartGoal
        from ledger.eventstore import store

        self.store = store
        self.goal_id = str(uuid.uuid4())
        token = "0" * 64  # a lease token's digest; the benchmark holds the lease
        store.start(RunGoal(StartGoal(goal_id=self.goal_id, workspace=f"/{key}", goal_key=key,
                                      objective="benchmark", agent="agent-1"), "agent-1", token),
                    actor="agent-1")
        self.command = RecordCheckpoint(
            current_step="running the integration tests against the staging database",
            progress_pct=40,
            completed=("reproduced the failure locally", "wrote a failing test"),
            next_actions=("fix the race in the checkout handler", "open the pull request"),
            note="the flake shows up about once in twenty runs",
            proof=LeaseProof(token, 1))
        self.latencies: list[float] = []

    def run(self, n: int) -> float:
        from ledger.services.caller import Caller
        from ledger.services.caller import run as execute

        caller, goal_id, command = Caller("agent-1"), self.goal_id, self.command
        times = []
        started = time.perf_counter()
        for _ in range(n):
            t0 = time.perf_counter()
            execute(caller, goal_id, command)
            times.append(time.perf_counter() - t0)
        rate = n / (time.perf_counter() - started)
        self.latencies.extend(times)
        return rate

    def payload(self) -> str:
        """The JSON our last event stored, for the raw side to insert."""
        from ledger.models import Event

        data = Event.objects.filter(goal_id=self.goal_id).order_by("-seq").first().data
        return json.dumps(data)


class RawSQLite:
    def __init__(self, path: Path, data: str):
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute(RAW_TABLE.format(pk="INTEGER PRIMARY KEY", json="TEXT", ts="TEXT"))
        self.goal = uuid.uuid4().hex
        self.seq = 0
        self.data = data

    def run(self, n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            self.seq += 1
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute(
                "INSERT INTO bench_raw_event (goal_id, seq, kind, data, actor, recorded_at, "
                "idempotency_key, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (self.goal, self.seq, "checkpoint.recorded", self.data, "agent-1",
                 datetime.now(UTC).isoformat(), None, "0" * 64, "f" * 64))
            self.db.execute("COMMIT")
        return n / (time.perf_counter() - started)


class RawPostgres:
    def __init__(self, url: str, data: str):
        import psycopg

        self.db = psycopg.connect(url)
        with self.db.cursor() as cur:
            cur.execute(RAW_TABLE.format(pk="BIGSERIAL PRIMARY KEY", json="JSONB",
                                         ts="TIMESTAMPTZ"))
        self.db.commit()
        self.goal = uuid.uuid4().hex
        self.seq = 0
        self.data = data

    def run(self, n: int) -> float:
        started = time.perf_counter()
        cur = self.db.cursor()
        for _ in range(n):
            self.seq += 1
            cur.execute(
                "INSERT INTO bench_raw_event (goal_id, seq, kind, data, actor, recorded_at, "
                "idempotency_key, prev_hash, hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (self.goal, self.seq, "checkpoint.recorded", self.data, "agent-1",
                 datetime.now(UTC), None, "0" * 64, "f" * 64))
            self.db.commit()
        cur.close()
        return n / (time.perf_counter() - started)


class EventSourcing:
    """The `eventsourcing` library (9.5, a bench-only extra: pip install
    '.[bench]'): one aggregate, one event with the same payload per
    ``save()``, each save its own transaction. Its SQLite recorder uses WAL
    and leaves synchronous at SQLite's default, FULL; its PostgreSQL recorder
    commits with the server's (durable) defaults."""

    def __init__(self, env: dict[str, str], data: str):
        from eventsourcing.application import Application
        from eventsourcing.domain import Aggregate, event

        class Goal(Aggregate):
            @event("Started")
            def __init__(self) -> None:
                pass

            @event("CheckpointRecorded")
            def checkpoint(self, data: dict) -> None:
                pass

        self.app = Application(env=env)
        self.goal = Goal()
        self.app.save(self.goal)
        self.data = json.loads(data)

    def run(self, n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            self.goal.checkpoint(self.data)
            self.app.save(self.goal)
        return n / (time.perf_counter() - started)


def eventsourcing_available() -> bool:
    try:
        import eventsourcing  # noqa: F401
    except ImportError:
        print("eventsourcing is not installed (pip install '.[bench]'): its baseline is "
              "skipped", file=sys.stderr)
        return False
    return True


def sqlite_bytes_per_row(path: Path, table: str) -> float:
    """Pages of ``table`` and its indexes (SQLite's dbstat), per row."""
    db = sqlite3.connect(path)
    names = [r[0] for r in db.execute(
        "SELECT name FROM sqlite_master WHERE tbl_name = ? AND type IN ('table', 'index')",
        (table,))]
    size = db.execute(f"SELECT SUM(pgsize) FROM dbstat WHERE name IN "
                      f"({','.join('?' * len(names))})", names).fetchone()[0]
    rows = db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    db.close()
    return size / rows


def postgres_bytes_per_row(cursor_execute: Callable[[str], tuple], table: str) -> float:
    size, = cursor_execute(f"SELECT pg_total_relation_size('{table}')")
    rows, = cursor_execute(f"SELECT COUNT(*) FROM {table}")
    return size / rows


def measure(database: str, ours: Ours, raw: RawSQLite | RawPostgres,
            floor: FloorSQLite | FloorPostgres, library: EventSourcing | None, events: int,
            reps: int) -> list[Row]:
    """Rounds of every side in turn (the order rotating), so each round's
    ratios compare sides measured within seconds of each other."""
    cpu = Cpu()
    sides = [cpu.wrap("store.execute", ours.run), cpu.wrap("raw INSERT+COMMIT", raw.run),
             cpu.wrap("the command's SQL alone (floor)", floor.run)]
    if library:
        sides.append(cpu.wrap("eventsourcing", library.run))

    def warmed() -> None:
        ours.latencies.clear()
        floor.latencies.clear()
        cpu.clear()

    rates = rotating_rounds(sides, events, reps, warmed=warmed)
    cpu.print(database)
    mine = median(rates[0])
    p50, p99 = percentile_ms(ours.latencies, 50), percentile_ms(ours.latencies, 99)
    f50, f99 = percentile_ms(floor.latencies, 50), percentile_ms(floor.latencies, 99)
    driver = "sqlite3" if database == "sqlite" else "psycopg"
    raw_name = f"raw {driver} INSERT+COMMIT"
    floor_name = ("the command's statements alone, parameters prebuilt (bench/floor.py, "
                  f"{'sqlite3' if database == 'sqlite' else 'libpq'})")
    rows = [Row(name=f"append {database}: store.execute, 1 checkpoint per transaction",
                value=mine, unit="events/s", baseline=raw_name,
                baseline_value=median(rates[1]),
                ratio=round_ratio(rates[0], rates[1]),
                p50_ms=p50, p99_ms=p99, n=events, reps=reps),
            Row(name=f"append {database}: store.execute vs the command's SQL alone (floor)",
                value=mine, unit="events/s", baseline=floor_name,
                baseline_value=median(rates[2]), ratio=round_ratio(rates[0], rates[2]),
                p50_ms=p50, p99_ms=p99, n=events, reps=reps),
            Row(name=f"append {database}: the command's SQL alone (floor) vs raw INSERT+COMMIT",
                value=median(rates[2]), unit="events/s", baseline=raw_name,
                baseline_value=median(rates[1]), ratio=round_ratio(rates[2], rates[1]),
                p50_ms=f50, p99_ms=f99, n=events, reps=reps)]
    if library:
        es_name = f"eventsourcing 9.5 {database} recorder, 1 event per save()"
        rows.append(Row(
            name=f"append {database}: store.execute vs the eventsourcing library",
            value=mine, unit="events/s", baseline=es_name,
            baseline_value=median(rates[3]),
            ratio=round_ratio(rates[0], rates[3]),
            p50_ms=p50, p99_ms=p99, n=events, reps=reps))
        rows.append(Row(
            name=f"append {database}: the command's SQL alone (floor) vs the eventsourcing "
                 "library",
            value=median(rates[2]), unit="events/s", baseline=es_name,
            baseline_value=median(rates[3]), ratio=round_ratio(rates[2], rates[3]),
            p50_ms=f50, p99_ms=f99, n=events, reps=reps))
    return rows


def bench_sqlite(events: int, reps: int) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="wakeledger-bench-") as tmp:
        django_setup(tmp)
        from django.db import connection

        ours = Ours()
        ours.run(1)
        raw = RawSQLite(Path(tmp) / "raw.sqlite3", ours.payload())
        floor = FloorSQLite(str(Path(tmp) / "ledger.sqlite3"), prepare())
        library = EventSourcing({"PERSISTENCE_MODULE": "eventsourcing.sqlite",
                                 "SQLITE_DBNAME": str(Path(tmp) / "es.sqlite3")},
                                ours.payload()) if eventsourcing_available() else None
        rows = measure("sqlite", ours, raw, floor, library, events, reps)
        connection.close()
        floor.close()
        raw.db.close()
        mine = sqlite_bytes_per_row(Path(tmp) / "ledger.sqlite3", "ledger_event")
        theirs = sqlite_bytes_per_row(Path(tmp) / "raw.sqlite3", "bench_raw_event")
        size = Row(name="storage sqlite: event table + indexes per event", value=mine,
                   unit="bytes/event", baseline="raw event table, same payload",
                   baseline_value=theirs, ratio=mine / theirs, p50_ms=None, p99_ms=None,
                   n=raw.seq, reps=1)
        return [*rows, size]


def bench_postgres(events: int, reps: int) -> list[Row]:
    from bench.pg import django_on_durable_server

    with django_on_durable_server() as url:
        if url is None:
            return []
        from django.db import connection

        ours = Ours()
        ours.run(1)
        raw = RawPostgres(url, ours.payload())
        floor = FloorPostgres(url, prepare())
        parts = urlsplit(url)
        library = EventSourcing({
            "PERSISTENCE_MODULE": "eventsourcing.postgres", "POSTGRES_DBNAME": "wakeledger",
            "POSTGRES_HOST": parts.hostname or "", "POSTGRES_PORT": str(parts.port),
            "POSTGRES_USER": parts.username or "", "POSTGRES_PASSWORD": "trust"},
            ours.payload()) \
            if eventsourcing_available() else None
        rows = measure("postgres", ours, raw, floor, library, events, reps)
        floor.close()

        def one(sql: str) -> tuple:
            with connection.cursor() as cursor:
                cursor.execute(sql)
                return cursor.fetchone()

        mine = postgres_bytes_per_row(one, "ledger_event")
        theirs = postgres_bytes_per_row(one, "bench_raw_event")
        size = Row(name="storage postgres: event table + indexes + TOAST per event",
                   value=mine, unit="bytes/event", baseline="raw event table, same payload",
                   baseline_value=theirs, ratio=mine / theirs, p50_ms=None, p99_ms=None,
                   n=raw.seq, reps=1)
        connection.close()
        raw.db.close()
        return [*rows, size]


def main() -> None:
    database_main(__doc__, __file__, {"sqlite": bench_sqlite, "postgres": bench_postgres})


if __name__ == "__main__":
    os.environ.pop("DATABASE_URL", None)
    main()
