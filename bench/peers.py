"""Append against the peers a user weighs for "record a step durably": DBOS and LangGraph.

    make bench            (or: python bench/peers.py [--quick] [--events N])

Same run, same database file system or server, same ~300-byte payload (the
JSON our checkpoint event stores), one durable write per operation, rounds
alternating between the sides (the order rotating), ratio = the median of
the per-round ratios, as bench/append.py:

- ours: ``store.execute`` of one checkpoint (lock the goal row, decide, hash,
  insert the event, fold and update the projection), one transaction.
- DBOS Transact 3.4 (``dbos``, a bench-only extra): one ``@DBOS.step`` call
  inside a running workflow returning the payload; DBOS records the step's
  result as one ``operation_outputs`` row in its system database, one
  transaction per step (after a read asking whether the step already ran).
  (The workflow's own status row is written when a round's workflow starts
  and ends: two writes per round of N steps, left in.)
  DBOS 3.x supports SQLite as its system database (its default) and
  PostgreSQL.
- the floor (bench/floor.py): the very statements ``store.execute`` sends
  for that checkpoint, on the same ledger database, parameters built before
  the clock starts; its rows say how near a peer the command could come at
  best while keeping those statements.
- LangGraph (``langgraph-checkpoint-sqlite`` 3.1 ``SqliteSaver.put``,
  ``langgraph-checkpoint-postgres`` 3.2 ``PostgresSaver.put``): one checkpoint
  whose one channel holds the payload. SqliteSaver writes one row (checkpoint
  with its channel values, msgpack) and commits; PostgresSaver upserts the
  channel's blob and the checkpoint row in one pipeline on the autocommit
  connection its documentation asks for: two statements behind one Sync,
  which the server runs as one implicit transaction (one round trip, one
  COMMIT record: ``python bench/floor.py --database postgres``).

Durability, alike on every side: SQLite files in WAL mode with
synchronous=FULL (set on LangGraph's connection; DBOS's file is switched to
WAL before it opens it and keeps SQLite's default synchronous=FULL, which the
run checks); PostgreSQL is one throwaway server with its durable defaults
(fsync and synchronous_commit on, bench/pg.py), a database each.
"""

import json
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

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


class DbosSteps:
    """N ``@DBOS.step`` calls in one workflow: one operation_outputs row each."""

    def __init__(self, system_database_url: str, payload: dict[str, Any]):
        import logging

        from dbos import DBOS

        logging.getLogger("dbos").setLevel(logging.WARNING)
        DBOS(config={"name": "wakeledger-bench", "system_database_url": system_database_url,
                     "run_admin_server": False, "log_level": "WARNING"})

        @DBOS.step()
        def record(data: dict[str, Any]) -> dict[str, Any]:
            return data

        @DBOS.workflow()
        def steps(n: int, data: dict[str, Any]) -> None:
            for _ in range(n):
                record(data)

        DBOS.launch()
        self.steps, self.payload = steps, payload

    def run(self, n: int) -> float:
        started = time.perf_counter()
        self.steps(n, self.payload)
        return n / (time.perf_counter() - started)

    @staticmethod
    def close() -> None:
        from dbos import DBOS

        DBOS.destroy()


class LangGraphPuts:
    """``saver.put`` of one checkpoint per call, one thread of checkpoints."""

    def __init__(self, saver: Any, payload: dict[str, Any]):
        self.saver = saver
        saver.setup()
        self.payload = payload
        self.config: Any = {"configurable": {"thread_id": uuid.uuid4().hex, "checkpoint_ns": ""}}
        self.version = 0

    def run(self, n: int) -> float:
        from langgraph.checkpoint.base import empty_checkpoint

        put, started = self.saver.put, time.perf_counter()
        for _ in range(n):
            self.version += 1
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"progress": self.payload}
            checkpoint["channel_versions"] = {"progress": self.version}
            self.config = put(self.config, checkpoint, {"source": "loop", "step": self.version},
                              {"progress": self.version})
        return n / (time.perf_counter() - started)


def wal_full(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    return db


def measure(database: str, ours: Any, peers: list[tuple[str, Any]],
            floors: list[tuple[str, Any]], events: int, reps: int) -> list[Row]:
    """Ours, each peer and each floor (the command's SQL alone, bench/floor.py;
    on PostgreSQL also the two-trip experiment) in rotating rounds; rows of
    ours against each peer, then of each floor against each peer (what our
    ratio could be at best, keeping the command's statements)."""
    cpu = Cpu()
    sides = ([cpu.wrap("store.execute", ours.run)]
             + [cpu.wrap(baseline.split(",")[0], peer.run) for baseline, peer in peers]
             + [cpu.wrap(label, floor.run) for label, floor in floors])

    def warmed() -> None:
        ours.latencies.clear()
        for _, floor in floors:
            floor.latencies.clear()
        cpu.clear()

    rates = rotating_rounds(sides, events, reps, warmed=warmed)
    cpu.print(database)
    p50, p99 = percentile_ms(ours.latencies, 50), percentile_ms(ours.latencies, 99)
    rows = [Row(name=f"peers {database}: store.execute vs {short}", value=median(rates[0]),
                unit="events/s", baseline=baseline, baseline_value=median(rates[i]),
                ratio=round_ratio(rates[0], rates[i]),
                p50_ms=p50, p99_ms=p99, n=events, reps=reps)
            for i, (baseline, _) in enumerate(peers, start=1)
            for short in [baseline.split(",")[0]]]
    for k, (label, floor) in enumerate(floors, start=1 + len(peers)):
        f50, f99 = percentile_ms(floor.latencies, 50), percentile_ms(floor.latencies, 99)
        rows += [Row(name=f"peers {database}: {label} vs {short}",
                     value=median(rates[k]), unit="events/s", baseline=baseline,
                     baseline_value=median(rates[i]), ratio=round_ratio(rates[k], rates[i]),
                     p50_ms=f50, p99_ms=f99, n=events, reps=reps)
                 for i, (baseline, _) in enumerate(peers, start=1)
                 for short in [baseline.split(",")[0]]]
    return rows


FLOOR = "the command's SQL alone (floor)"
TWO_TRIPS = "the floor in 2 round trips (write + COMMIT pipelined, an experiment)"


def peers_available() -> bool:
    try:
        import dbos  # noqa: F401
        import langgraph.checkpoint.postgres
        import langgraph.checkpoint.sqlite  # noqa: F401
    except ImportError as error:
        print(f"{error.name} is not installed (pip install '.[bench]'): the peer rows are "
              "skipped", file=sys.stderr)
        return False
    return True


def bench_sqlite(events: int, reps: int) -> list[Row]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    from bench.append import Ours

    with tempfile.TemporaryDirectory(prefix="wakeledger-bench-") as tmp:
        django_setup(tmp)
        ours = Ours()
        ours.run(1)
        payload = json.loads(ours.payload())
        dbos_file = Path(tmp) / "dbos.sqlite3"
        wal_full(dbos_file).close()  # journal_mode=WAL is kept in the file
        dbos = DbosSteps(f"sqlite:///{dbos_file}", payload)
        with sqlite3.connect(dbos_file) as check:
            mode = check.execute("PRAGMA journal_mode").fetchone()[0]
            sync = check.execute("PRAGMA synchronous").fetchone()[0]
        assert (mode, sync) == ("wal", 2), (mode, sync)  # 2 = FULL
        graph = LangGraphPuts(SqliteSaver(wal_full(Path(tmp) / "langgraph.sqlite3")), payload)
        floor = FloorSQLite(str(Path(tmp) / "ledger.sqlite3"), prepare())
        try:
            return measure("sqlite", ours, [
                ("DBOS 3.4 step, SQLite system database, 1 operation_outputs row per step",
                 dbos),
                ("LangGraph SqliteSaver.put, 1 checkpoint row per put", graph)],
                [(FLOOR, floor)], events, reps)
        finally:
            dbos.close()
            floor.close()


def bench_postgres(events: int, reps: int) -> list[Row]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    from bench.append import Ours
    from bench.pg import django_on_durable_server

    with django_on_durable_server() as url:
        if url is None:
            return []
        ours = Ours()
        ours.run(1)
        payload = json.loads(ours.payload())
        base = url.rsplit("/", 1)[0]
        with psycopg.connect(url, autocommit=True) as admin:
            for name in ("bench_dbos", "bench_langgraph"):
                admin.execute(f"CREATE DATABASE {name}")
        dbos = DbosSteps(f"{base}/bench_dbos", payload)
        conn = psycopg.connect(f"{base}/bench_langgraph", autocommit=True, prepare_threshold=0,
                               row_factory=dict_row)
        graph = LangGraphPuts(PostgresSaver(conn), payload)
        floor = FloorPostgres(url, prepare())
        two_trips = FloorPostgres(url, prepare("floor-two-trips"), two_trips=True)
        try:
            return measure("postgres", ours, [
                ("DBOS 3.4 step, PostgreSQL system database, 1 operation_outputs row per step",
                 dbos),
                ("LangGraph PostgresSaver.put, blob + checkpoint upsert per put", graph)],
                [(FLOOR, floor), (TWO_TRIPS, two_trips)], events, reps)
        finally:
            dbos.close()
            conn.close()
            floor.close()
            two_trips.close()
            from django.db import connection

            connection.close()


def main() -> None:
    database_main(__doc__, __file__, {"sqlite": bench_sqlite, "postgres": bench_postgres},
                  available=peers_available)


if __name__ == "__main__":
    os.environ.pop("DATABASE_URL", None)
    main()
