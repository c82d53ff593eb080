"""The floor: the SQL one checkpoint command sends, and nothing else.

    used by bench/append.py and bench/peers.py (their floor rows);
    python bench/floor.py [--database sqlite|postgres]   the physics of every side per
        operation: WAL frames and statements (SQLite); commits, WAL bytes, round trips

``store.execute`` of a checkpoint sends a fixed set of statements; this side
sends exactly those, on the same migrated ledger database (same tables,
indexes, foreign keys and append-only triggers), with the same durability,
and does nothing else: no Django, no rules, no JSON, no hashing inside the
timed loop. Whatever our side costs above this side is our own code; a peer
faster than this side cannot be matched while keeping what those statements
keep (the locked read of the goal, the event with its (goal, seq) uniqueness
and hash chain, the projection updated in the same transaction).

- SQLite (WAL, synchronous=FULL, foreign keys on, as Django's connection):
  BEGIN IMMEDIATE; SELECT version, last_hash, state FROM ledger_goal WHERE
  id=?; INSERT INTO ledger_event ...; UPDATE ledger_goal SET version,
  last_hash, state, <the projected columns a checkpoint changes> WHERE id=?
  AND version=?; COMMIT. Through Python's sqlite3, as the store's own cursor
  sends them. The writers' flock queue (ledger/backends/sqlite3) is not SQL
  and is left out.
- PostgreSQL (bench/pg.py's durable server), through libpq as the store
  sends them: BEGIN and the SELECT ... FOR UPDATE in one simple query, the
  prepared WITH-insert-update statement (the very text the store prepared),
  COMMIT: three round trips.

Every parameter is built before a round's clock starts: the goal's real
stored state, the real JSON of a checkpoint event (the store's own text),
a new seq and version each time, hashes precomputed (a chain of SHA-256),
timestamps a microsecond apart. ``prepare`` drives one goal of its own
through the store first, so the state, the event and the changed columns are
the store's, and reads them back (a ``FloorSetup``).

``FloorPostgres(..., two_trips=True)`` is an experiment, not the store's
statements: what saving a round trip would take (bench/peers.py's rows).
"""

import hashlib
import os
import resource
import sqlite3
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# How far a checkpoint moves the goal's liveness deadline: only its size in
# the row matters here, not its value.
_DEADLINE_AHEAD = timedelta(hours=2)


@dataclass
class FloorSetup:
    """What the floor replays, read back from a goal the store wrote."""

    goal_id: uuid.UUID
    seq: int  # the goal's last event
    version: int
    head: str
    state: str  # the goal row's stored state, as the store wrote it
    data: str  # a checkpoint event's stored JSON
    changed: tuple[str, ...]  # the projected columns a checkpoint changes
    others: dict[str, Any]  # the values of any changed column that is not a time


def prepare(key: str = "floor") -> FloorSetup:
    """A goal of the floor's own, through the store: started, two checkpoints
    (the first may change more columns than the steady ones), then the row
    and the last event as stored. Django is set up on the bench's database."""
    from django.db import connection

    from bench.append import Ours
    from ledger.eventstore import appendsql, store

    primer = Ours(key=key)  # one goal per key
    primer.run(1)
    before = store.projected_columns(store.load(primer.goal_id))
    primer.run(1)
    after = store.projected_columns(store.load(primer.goal_id))
    changed = tuple(name for name in appendsql.MUTABLE if after[name] != before[name])
    uid = uuid.UUID(primer.goal_id)
    pk = appendsql.pk_of(connection, uid)
    with connection.cursor() as cursor:
        cursor.execute("SELECT version, last_hash, state FROM ledger_goal WHERE id = %s", [pk])
        version, head, state = cursor.fetchone()
        cast = "data::text" if connection.vendor == "postgresql" else "data"
        cursor.execute(f"SELECT seq, {cast} FROM ledger_event WHERE goal_id = %s "
                       "ORDER BY seq DESC LIMIT 1", [pk])
        seq, data = cursor.fetchone()
    if not isinstance(state, str):  # psycopg hands jsonb back decoded
        import json

        state = json.dumps(state)
    others = {name: after[name] for name in changed if not name.endswith("_at")}
    return FloorSetup(uid, seq, version, head, state, data, changed, others)


def _times(n: int, vendor: str) -> list[tuple[Any, Any]]:
    """(now, deadline) for n commands, a microsecond apart, as each driver's
    parameter (what appendsql writes: naive UTC text on SQLite, ISO text with
    the offset through libpq)."""
    start = datetime.now(UTC)
    out = []
    for i in range(n):
        now = start + timedelta(microseconds=i)
        deadline = now + _DEADLINE_AHEAD
        if vendor == "sqlite":
            out.append((str(now.replace(tzinfo=None)), str(deadline.replace(tzinfo=None))))
        else:
            out.append((now.isoformat().encode(), deadline.isoformat().encode()))
    return out


def _hashes(head: str, n: int) -> list[str]:
    out = []
    for _ in range(n):
        head = hashlib.sha256(head.encode()).hexdigest()
        out.append(head)
    return out


class _Floor:
    """Shared bookkeeping: the goal's position in its chain, latencies."""

    def __init__(self, setup: FloorSetup):
        self.setup = setup
        self.seq, self.version, self.head = setup.seq, setup.version, setup.head
        self.latencies: list[float] = []

    def _ran(self, n: int, started: float, head: str, latencies: list[float]) -> float:
        """A round's rate; the goal moved on by n commands, ending at ``head``."""
        rate = n / (time.perf_counter() - started)
        self.seq, self.version, self.head = self.seq + n, self.version + n, head
        self.latencies.extend(latencies)
        return rate

    def _changed_values(self, now: Any, deadline: Any) -> list[Any]:
        values = []
        for name in self.setup.changed:
            if name == "deadline_at":
                values.append(deadline)
            elif name.endswith("_at"):
                values.append(now)
            else:
                values.append(self.setup.others[name])
        return values


class FloorSQLite(_Floor):
    """The command's statements through Python's sqlite3, its own connection."""

    def __init__(self, path: str, setup: FloorSetup):
        from django.db import connection

        from ledger.eventstore import appendsql

        super().__init__(setup)
        sql = appendsql.statements_for(connection)
        self.lock, self.insert = sql.lock, sql.insert_head + sql.insert_row
        self.update = sql.update(setup.changed)
        self.pk = setup.goal_id.hex  # appendsql.pk_of on SQLite
        # As Django's connection: autocommit in the driver, WAL (kept in the
        # file), synchronous=FULL (settings' init_command), foreign keys on
        # (Django's SQLite backend turns them on for every connection).
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("PRAGMA foreign_keys=ON")

    def run(self, n: int) -> float:
        s = self.setup
        times, hashes = _times(n, "sqlite"), _hashes(self.head, n)
        commands = []
        prev = self.head
        for i in range(n):
            seq, version = self.seq + 1 + i, self.version + 1 + i
            now, deadline = times[i]
            commands.append((
                (self.pk,),
                (self.pk, seq, "checkpoint.recorded", s.data, "agent-1", now, None, prev,
                 hashes[i]),
                (version, hashes[i], s.state, *self._changed_values(now, deadline), self.pk,
                 version - 1)))
            prev = hashes[i]
        execute, lock, insert, update = self.db.execute, self.lock, self.insert, self.update
        latencies = []
        started = time.perf_counter()
        for lock_args, insert_args, update_args in commands:
            t0 = time.perf_counter()
            execute("BEGIN IMMEDIATE")
            execute(lock, lock_args).fetchone()
            execute(insert, insert_args)
            if execute(update, update_args).rowcount != 1:
                raise RuntimeError("the floor's goal row moved under it")
            execute("COMMIT")
            latencies.append(time.perf_counter() - t0)
        return self._ran(n, started, prev, latencies)

    def close(self) -> None:
        self.db.close()


class FloorPostgres(_Floor):
    """The command's statements through libpq, as appendsql sends them."""

    def __init__(self, url: str, setup: FloorSetup, *, two_trips: bool = False):
        """``two_trips``: not the store's statements but what it would take to
        save a round trip keeping every guarantee (an experiment, its own
        rows): the write made conditional on the goal row's update (the event
        is inserted from the UPDATE's RETURNING, so a missed update writes
        nothing) and sent with the COMMIT in one pipeline, one Sync."""
        import psycopg

        from ledger.eventstore import appendsql

        super().__init__(setup)
        self.two_trips = two_trips
        # The exact WITH statement the store prepared for a checkpoint of
        # these changed columns: if it is missing, the store sent another.
        query = appendsql._PG_APPENDS.get((1, setup.changed))
        if query is None:
            raise RuntimeError(f"the store prepared no append for {setup.changed}")
        if two_trips:
            query = _conditional_append(setup.changed)
        self.conn = psycopg.connect(url)
        self.pgconn = self.conn.pgconn
        self.lock = appendsql.LOCK_PG.format(uid=setup.goal_id).encode()
        self.name = b"wakeledger_floor_append" + (b"_2" if two_trips else b"")
        result = self.pgconn.prepare(self.name, query)
        self._check(result, "COMMAND_OK")
        self.pk = str(setup.goal_id).encode()

    def _check(self, result: Any, status: str) -> None:
        from psycopg import errors, pq

        if result.status != getattr(pq.ExecStatus, status):
            raise errors.error_from_result(result, encoding=self.conn.info.encoding)

    def run(self, n: int) -> float:
        from psycopg import pq

        from ledger.eventstore.appendsql import _as_text as as_text

        s = self.setup
        times, hashes = _times(n, "postgres"), _hashes(self.head, n)
        data, state = s.data.encode(), s.state.encode()
        params = []
        prev = self.head
        for i in range(n):
            seq, version = self.seq + 1 + i, self.version + 1 + i
            now, deadline = times[i]
            changed = [v if isinstance(v, bytes) else as_text(v)
                       for v in self._changed_values(now, deadline)]
            params.append([self.pk, str(seq).encode(), b"checkpoint.recorded", data,
                           b"agent-1", now, None, prev.encode(), hashes[i].encode(),
                           str(version).encode(), hashes[i].encode(), state, *changed,
                           self.pk, str(version - 1).encode()])
            prev = hashes[i]
        pgconn, lock, name = self.pgconn, self.lock, self.name
        tuples_ok, command_ok = pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK
        latencies = []
        started = time.perf_counter()
        if self.two_trips:
            return self._run_two_trips(n, params, prev)
        for values in params:
            t0 = time.perf_counter()
            locked = pgconn.exec_(lock)
            if locked.status != tuples_ok or locked.ntuples != 1:
                self._check(locked, "TUPLES_OK")
                raise RuntimeError("the floor's goal row is gone")
            locked.get_value(0, 2)
            written = pgconn.exec_prepared(name, values)
            if written.status != tuples_ok or written.command_tuples != 1:
                self._check(written, "TUPLES_OK")
                raise RuntimeError("the floor's goal row moved under it")
            written.get_value(0, 0)
            committed = pgconn.exec_(b"COMMIT")
            if committed.status != command_ok:
                self._check(committed, "COMMAND_OK")
            latencies.append(time.perf_counter() - t0)
        return self._ran(n, started, prev, latencies)

    def _run_two_trips(self, n: int, params: list[list[Any]], prev: str) -> float:
        from psycopg import pq

        pgconn, lock, name = self.pgconn, self.lock, self.name
        tuples_ok, command_ok = pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK
        latencies = []
        started = time.perf_counter()
        for values in params:
            t0 = time.perf_counter()
            locked = pgconn.exec_(lock)
            if locked.status != tuples_ok or locked.ntuples != 1:
                self._check(locked, "TUPLES_OK")
                raise RuntimeError("the floor's goal row is gone")
            locked.get_value(0, 2)
            pgconn.enter_pipeline_mode()
            pgconn.send_query_prepared(name, values)
            pgconn.send_query_params(b"COMMIT", None)
            pgconn.pipeline_sync()
            written = pgconn.get_result()
            pgconn.get_result()  # the end of the write's results
            committed = pgconn.get_result()
            pgconn.get_result()
            synced = pgconn.get_result()
            pgconn.exit_pipeline_mode()
            if written.status != tuples_ok or written.ntuples != 1:
                # Committed with nothing written: the event goes in only with its update.
                self._check(written, "TUPLES_OK")
                raise RuntimeError("the floor's goal row moved under it")
            written.get_value(0, 0)
            if committed.status != command_ok or synced.status != pq.ExecStatus.PIPELINE_SYNC:
                self._check(committed, "COMMAND_OK")
            latencies.append(time.perf_counter() - t0)
        return self._ran(n, started, prev, latencies)

    def close(self) -> None:
        self.conn.close()


def _conditional_append(changed: tuple[str, ...]) -> bytes:
    """The store's append with the same parameters ($1-$9 the event's, then
    the UPDATE's), but the event inserted from the UPDATE's RETURNING: a goal
    row that did not match (version moved) writes no event, so the COMMIT
    sent with it in one pipeline commits nothing, and the client sees no row.
    Typed casts: an INSERT ... SELECT does not infer its parameters' types."""
    from ledger.models import Event, Goal

    p = len(changed)
    types = {"version": "::integer", "state": "::jsonb"}
    assignments = ", ".join(
        f"{column} = ${i}{types.get(column, '::timestamptz' if column.endswith('_at') else '')}"
        for i, column in enumerate(("version", "last_hash", "state", *changed), start=10))
    return (f"WITH updated AS (UPDATE {Goal._meta.db_table} SET {assignments} "
            f"WHERE id = ${13 + p}::uuid AND version = ${14 + p}::integer RETURNING state) "
            f"INSERT INTO {Event._meta.db_table} (goal_id, seq, kind, data, actor, recorded_at, "
            "idempotency_key, prev_hash, hash) SELECT $1::uuid, $2::integer, $3, $4::jsonb, $5, "
            "$6::timestamptz, $7, $8, $9 FROM updated RETURNING (SELECT state FROM updated)"
            ).encode()


def fsync_ms(directory: str | None = None, n: int = 50) -> float:
    """The median time of a 4 KB write's fsync in ``directory`` (the temporary
    directory the benches use), in ms: which regime a run measured. This
    machine's disk flushes either fast (≈ 0.1 ms: the CPU and the pages
    written decide a commit's time) or on a 4 ms tick (every side waits the
    same tick and the ratios go to ≈ 1)."""
    import statistics
    import tempfile

    with tempfile.TemporaryFile(dir=directory) as f:
        times = []
        for _ in range(n):
            f.write(b"x" * 4096)
            f.flush()
            t0 = time.perf_counter()
            os.fsync(f.fileno())
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


class Cpu:
    """User and system CPU of this process per operation, round by round
    (``resource.getrusage``): wrap a side's ``run``; ``clear`` after the
    warm-up. On PostgreSQL the server's CPU is not in it."""

    def __init__(self) -> None:
        self.rounds: dict[str, list[tuple[float, float]]] = {}

    def wrap(self, label: str, run: Callable[[int], float]) -> Callable[[int], float]:
        def counted(n: int) -> float:
            before = resource.getrusage(resource.RUSAGE_SELF)
            rate = run(n)
            after = resource.getrusage(resource.RUSAGE_SELF)
            self.rounds.setdefault(label, []).append(
                ((after.ru_utime - before.ru_utime) / n * 1e6,
                 (after.ru_stime - before.ru_stime) / n * 1e6))
            return rate
        return counted

    def clear(self) -> None:
        self.rounds.clear()

    def report(self, database: str) -> str:
        """One line per side: the median round's user and system µs per operation."""
        import statistics

        lines = [f"CPU of this process per operation, {database} (median of rounds; "
                 f"a 4 KB fsync here now: {fsync_ms():.2f} ms, load {os.getloadavg()[0]:.1f}):"]
        for label, rounds in self.rounds.items():
            user = statistics.median(u for u, _ in rounds)
            system = statistics.median(s for _, s in rounds)
            lines.append(f"  {label:<34} user {user:6.0f} µs  sys {system:6.0f} µs  "
                         f"total {user + system:6.0f} µs")
        return "\n".join(lines)

    def print(self, database: str) -> None:
        print(self.report(database), file=sys.stderr, flush=True)


def wal_frames_per_operation(path: str, run: Callable[[int], float], n: int = 100) -> float:
    """WAL frames one operation of ``run`` appends to the database at ``path``:
    the WAL emptied first (a TRUNCATE checkpoint from a connection of our own,
    so no side's connection is touched), then n operations, fewer frames than
    the automatic checkpoint's 1,000, read off the WAL's size."""
    db = sqlite3.connect(path)
    busy = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    page = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    if busy:
        raise RuntimeError(f"{path}: a reader kept the WAL from being emptied")
    run(n)
    size = os.path.getsize(f"{path}-wal")
    return (size - 32) / (24 + page) / n if size else 0.0


def sqlite_physics() -> None:
    """Per operation of each side of bench/append.py and bench/peers.py on
    SQLite: WAL frames (pages the commit's fsync writes) and, where the
    side's connection is ours to trace, statements."""
    import json
    import tempfile

    from bench.append import EventSourcing, Ours, RawSQLite
    from bench.common import django_setup
    from bench.peers import LangGraphPuts, wal_full

    with tempfile.TemporaryDirectory(prefix="wakeledger-bench-") as tmp:
        django_setup(tmp)
        from django.db import connection
        from langgraph.checkpoint.sqlite import SqliteSaver

        ledger = str(Path(tmp) / "ledger.sqlite3")
        ours = Ours()
        ours.run(200)  # as profile_append: a new table's page splits out of the way
        data = ours.payload()
        floor = FloorSQLite(ledger, prepare())
        floor.run(200)
        raw = RawSQLite(Path(tmp) / "raw.sqlite3", data)
        raw.run(200)
        library = EventSourcing({"PERSISTENCE_MODULE": "eventsourcing.sqlite",
                                 "SQLITE_DBNAME": str(Path(tmp) / "es.sqlite3")}, data)
        library.run(200)
        graph_db = wal_full(Path(tmp) / "langgraph.sqlite3")
        graph = LangGraphPuts(SqliteSaver(graph_db), json.loads(data))
        graph.run(200)
        connection.ensure_connection()
        traced = {"store.execute": (ledger, ours.run, connection.connection),
                  "the command's SQL alone (floor)": (ledger, floor.run, floor.db),
                  "raw INSERT+COMMIT": (str(Path(tmp) / "raw.sqlite3"), raw.run, raw.db),
                  "eventsourcing": (str(Path(tmp) / "es.sqlite3"), library.run, None),
                  "LangGraph SqliteSaver.put": (str(Path(tmp) / "langgraph.sqlite3"),
                                                graph.run, graph_db)}
        print("SQLite, per operation: WAL frames (one fsync each commit), statements")
        for label, (path, run, db) in traced.items():
            statements: list[str] = []
            if db is not None:
                db.set_trace_callback(statements.append)
            frames = wal_frames_per_operation(path, run)
            if db is not None:
                db.set_trace_callback(None)
            kinds = " ".join(s.split()[0] for s in statements[:len(statements) // 100])
            count = f"{len(statements) / 100:4.1f}" if db is not None else "   -"
            print(f"  {label:<34} {frames:5.2f} frames  {count} statements  {kinds}")
        floor.close()
        connection.close()


def postgres_physics() -> None:
    """Per operation of each side on PostgreSQL (bench/pg.py's durable
    server, a database each where the side allows): commits (COMMIT records
    in the WAL the side wrote, by pg_walinspect: each one a WAL flush the
    client waits for), WAL bytes, and, where the connection is ours to trace,
    round trips (a simple Query, or a Sync closing an extended-protocol
    batch, waits for the server)."""
    import json
    import tempfile
    from urllib.parse import urlsplit

    import psycopg
    from psycopg import pq
    from psycopg.rows import dict_row

    from bench.append import EventSourcing, Ours
    from bench.peers import LangGraphPuts
    from bench.pg import django_on_durable_server

    with django_on_durable_server() as url:
        if url is None:
            return
        from django.db import connection
        from langgraph.checkpoint.postgres import PostgresSaver

        base = url.rsplit("/", 1)[0]
        admin = psycopg.connect(url, autocommit=True)
        for name in ("bench_es", "bench_langgraph"):
            admin.execute(f"CREATE DATABASE {name}")
        ours = Ours()
        ours.run(200)
        data = ours.payload()
        floor = FloorPostgres(url, prepare())
        floor.run(200)
        two_trips = FloorPostgres(url, prepare("floor-two-trips"), two_trips=True)
        two_trips.run(200)
        parts = urlsplit(url)
        library = EventSourcing({
            "PERSISTENCE_MODULE": "eventsourcing.postgres", "POSTGRES_DBNAME": "bench_es",
            "POSTGRES_HOST": parts.hostname or "", "POSTGRES_PORT": str(parts.port),
            "POSTGRES_USER": parts.username or "", "POSTGRES_PASSWORD": "trust"}, data)
        library.run(200)
        graph_conn = psycopg.connect(f"{base}/bench_langgraph", autocommit=True,
                                     prepare_threshold=0, row_factory=dict_row)
        graph = LangGraphPuts(PostgresSaver(graph_conn), json.loads(data))
        graph.run(200)
        connection.ensure_connection()
        sides = {"store.execute": ("wakeledger", ours.run, connection.connection.pgconn),
                 "the command's SQL alone (floor)": ("wakeledger", floor.run, floor.pgconn),
                 "the floor in 2 round trips": ("wakeledger", two_trips.run, two_trips.pgconn),
                 "eventsourcing": ("bench_es", library.run, None),
                 "LangGraph PostgresSaver.put": ("bench_langgraph", graph.run,
                                                 graph_conn.pgconn)}

        admin.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")

        def lsn() -> str:
            return admin.execute("SELECT pg_current_wal_lsn()").fetchone()[0]

        def commit_records(start: str, end: str) -> int:
            return admin.execute(
                "SELECT coalesce(sum(count), 0) FROM pg_get_wal_stats(%s, %s, true) "
                "WHERE \"resource_manager/record_type\" = 'Transaction/COMMIT'",
                [start, end]).fetchone()[0]

        n = 200
        print("PostgreSQL, per operation: commits, WAL bytes, round trips")
        with tempfile.TemporaryDirectory() as tmp:
            for label, (_, run, pgconn) in sides.items():
                before_lsn = lsn()
                trace = Path(tmp) / "libpq.trace"
                fd = os.open(trace, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                if pgconn is not None:
                    pgconn.trace(fd)
                    pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
                run(n)
                if pgconn is not None:
                    pgconn.untrace()
                os.close(fd)
                after_lsn = lsn()
                wal = admin.execute("SELECT pg_wal_lsn_diff(%s, %s)",
                                    [after_lsn, before_lsn]).fetchone()[0]
                done = commit_records(before_lsn, after_lsn)
                sent = [line.split("\t")[2].split(" ")[0].strip()
                        for line in trace.read_text().splitlines() if line.startswith("F\t")]
                trips = (f"{(sent.count('Query') + sent.count('Sync')) / n:4.1f}"
                         if pgconn is not None else "   -")
                print(f"  {label:<34} {done / n:4.2f} commits  {float(wal) / n:6,.0f} WAL bytes"
                      f"  {trips} round trips")
        floor.close()
        two_trips.close()
        graph_conn.close()
        admin.close()
        connection.close()


def main() -> None:
    import argparse

    p = argparse.ArgumentParser(description="The physics of each side, per operation.")
    p.add_argument("--database", choices=("sqlite", "postgres", "both"), default="both")
    args = p.parse_args()
    if args.database in ("sqlite", "both"):
        sqlite_physics()
    if args.database in ("postgres", "both"):
        postgres_physics()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ.pop("DATABASE_URL", None)
    main()
