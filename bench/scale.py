"""What grows with the number of goals: each row at 1,000,000 active goals against 100,000.

    make bench                      (1,000,000 goals against 100,000: ~4 minutes)
    BENCH_SCALE=100000 make bench   (100,000 against 10,000: ~1 minute)
    BENCH_SCALE=0 make bench        (skip these rows)
    python bench/scale.py [--quick] [--small N] [--large M]

Two worker processes, one per size, each on its own SQLite file (WAL,
synchronous=FULL, as the product runs), seeded once and kept for every round;
the parent alternates rounds between them (the first side swapping each
round), and each row's ratio is the median of the per-round ratios large /
small. A row that costs what is due or listed, not what exists, reads ~1.0x;
the target is <= 1.5x.

Seeding (bench/seed.py's way: the legitimate path once, then SQL copies):
template goals are written through the store, and copied with INSERT ...
SELECT into M goal rows with their django-q2 schedule rows, each copy's ids
rewritten (row id, the state's goal_id, its workspace, its schedule's name and
argument), no events (nothing below reads a goal's history):

- every goal is active: waiting for its hourly internal watchdog (lease
  released), one watchdog schedule row each, next runs spread over an hour;
- ``--listed`` of them (200) are blocked and need a human (/alerts, the
  dashboard, the metrics' alert gauge list the same number at both sizes);
- ``--due`` x rounds of them (100 a round) hold a lease whose deadline passes
  one round after another: each sweep pass finds the same number due.

Rows, each timed in the worker, around the same call the product makes:

- sweep: one ``scheduling.tasks.sweep_leases`` pass, the clock moved so that
  the next ``--due`` leases are stale (each pass expires them, and blocks the
  goals the pass before woke and nobody pulled: the same work at both sizes);
- /alerts: GET /api/v1/alerts (first page, 50, and its total) as an auditor;
- dashboard: GET the admin's dashboard as a superuser (its wake-row group
  from a kept doctor pass that found FOUND goals, as the hourly repair keeps
  it: the page reads that pass, it runs no doctor);
- metrics: one scrape, ``generate_latest`` of ``ledger.operators.metrics``;
- claim: ``scheduling.tasks.fire_watchdog`` of one due internal watchdog
  (a fresh goal each time; the median of ``--claims`` per round);
- scheduler: one ``django_q.scheduler.scheduler`` pass with ``--due`` rows
  due (reset, untimed, before each pass).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Row, emit, median, parser, reps_of

OPS = ("sweep", "alerts", "dashboard", "metrics", "claim", "scheduler")
FOUND = 60  # goals the kept doctor pass found with a wake row wrong (the dashboard's group)
LABELS = {
    "sweep": "liveness sweep: one sweep_leases pass, {due} leases due",
    "alerts": "GET /alerts: first page (50) and its total, {listed} listed",
    "dashboard": "admin dashboard page, {listed} goals needing a human, {found} wake rows wrong",
    "metrics": "one /metrics scrape (generate_latest)",
    "claim": "claim: fire_watchdog of one due internal watchdog",
    "scheduler": "scheduler: one django-q2 pass, {due} schedules due",
}


# ---------------------------------------------------------------- the worker

class World:
    """One seeded database of ``goals`` active goals, answering timed ops."""

    def __init__(self, goals: int, due: int, listed: int, rounds: int, claims: int):
        self.goals, self.due, self.listed, self.claims_per_round = goals, due, listed, claims
        self.found = FOUND
        self.base = datetime.now(UTC).replace(microsecond=0)
        self.sweeps = 0
        t0 = time.perf_counter()
        self.seed(rounds)
        self.seconds = time.perf_counter() - t0
        print(f"{goals:,} goals: seeded in {self.seconds:.1f} s", file=sys.stderr, flush=True)

    # -- seeding

    def seed(self, rounds: int) -> None:
        from django.db import connection, transaction

        from bench.seed import TOKEN
        from ledger.domain import LeaseProof, RunGoal, StartGoal
        from ledger.domain.commands import ReleaseLease
        from ledger.domain.events import iso
        from ledger.domain.watchdogs import PrepareWatchdog
        from ledger.eventstore import clock, store, tallies
        from ledger.models import Goal

        proof = LeaseProof(TOKEN, 1)

        def start(key: str) -> str:
            goal_id = str(uuid.uuid4())
            store.start(RunGoal(StartGoal(goal_id=goal_id, workspace=f"/bench/scale/{key}",
                                          goal_key="bench", objective="benchmark",
                                          agent="agent-1"), "agent-1", TOKEN), actor="agent-1")
            store.execute(goal_id, PrepareWatchdog(proof), actor="agent-1")
            return goal_id

        # The world's clock. Its writers stamp their events at the world's
        # times (the leases' stale points, the watchdogs' due times), and its
        # readers (/alerts, the dashboard, the metrics) look at the world's
        # latest time (``self.now``): a reader at the real clock sees every goal
        # a sweep stamped ahead of it by more than the clock-skew bound as
        # OVERDUE (liveness: its deadline cannot be trusted), and one at an
        # hour ahead sees the unswept leases long overdue. So every write lies
        # within minutes of the others: the waiting goals' watchdogs fall due
        # among the sweeps (``rounds - 2`` minutes after the first; the claims
        # run a minute later), so that at the world's time after the last
        # sweep no deadline but the listed goals' has passed.
        with clock.use(lambda: self.base), transaction.atomic():
            leased = start("leased")
        self.now = self.base
        self.sweep_first = Goal.objects.get(pk=leased).deadline_at
        wake_after = self.wake_after(start, proof)
        waiting_at = self.sweep_first + timedelta(minutes=rounds - 2) - wake_after
        with clock.use(lambda: waiting_at), transaction.atomic():
            waiting = start("waiting")
            store.execute(waiting, ReleaseLease(proof), actor="agent-1")
        self.due_str = iso(store.load(waiting).watchdog.next_due_at)
        self.due_at = datetime.fromisoformat(self.due_str)
        # Each sweep k (at sweep_first + k min 30 s) leaves the waiting goals
        # before their deadline (5 minutes after their due time), and the
        # last leased batch before its own.
        last_sweep = self.sweep_first + timedelta(minutes=rounds, seconds=30)
        waiting_deadline = Goal.objects.get(pk=waiting).deadline_at
        assert last_sweep < waiting_deadline and self.due_at + timedelta(minutes=1) \
            < self.sweep_first + timedelta(minutes=rounds + 1), (last_sweep, waiting_deadline)
        sweeps = self.due * (rounds + 2)
        filler = self.goals - sweeps
        numbered = "workspace GLOB '/bench/scale/[0-9]*'"
        number = "CAST(substr(workspace, 14) AS INTEGER)"
        with transaction.atomic():
            self.copy(waiting, 0, filler)
            self.copy(leased, filler, sweeps)
            with connection.cursor() as cursor:
                # The leased copies' deadlines, one minute apart per batch of
                # ``due``: the sweep of round r finds batch r and no other.
                # (The leased template itself is due with batch 0: the warm-up.)
                cursor.execute(
                    f"UPDATE ledger_goal SET deadline_at = strftime('%%Y-%%m-%%d %%H:%%M:%%f', "
                    f"%s, '+' || (({number} - %s) / %s) || ' minutes') "
                    f"WHERE {numbered} AND {number} >= %s",
                    [self.sweep_first.strftime("%Y-%m-%d %H:%M:%S"), filler, self.due, filler])
                # Blocked goals that need a human: the same number at both sizes.
                cursor.execute(
                    "UPDATE ledger_goal SET status = 'blocked', reason = "
                    "'WAKE_RETRIES_EXHAUSTED', attention = 'WAKE_RETRIES_EXHAUSTED' "
                    f"WHERE {numbered} AND {number} < %s", [self.listed])
            # The copies were written in SQL, past the store: the goals-by-status
            # tallies /metrics reads are counted once, as migration 0017 does.
            tallies.recount()
        # The doctor's newest pass, as the hourly repair keeps it (running it
        # here would cost a query per goal: minutes at a million): ``found``
        # goals with a wake row late, the same at both sizes.
        from ledger.operators import doctor, passes

        found = [str(uuid.UUID(f"{3405691582:08x}{i:024x}"))
                 for i in range(filler - self.found, filler)]
        passes.record("scheduler", self.base, self.base, [
            doctor.Finding(gid, "schedule_late", "bench: a late row",
                           row=f"wakeledger-watchdog-{gid}") for gid in found],
            active=self.goals)
        self.claim_next = self.listed  # waiting copies after the blocked ones
        self.claim_end = filler - self.found
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def wake_after(self, start: Any, proof: Any) -> timedelta:
        """How long after its lease's release a waiting goal's watchdog falls
        due: one such goal seeded and rolled back."""
        from django.db import transaction

        from ledger.domain.commands import ReleaseLease
        from ledger.eventstore import clock, store

        class Probed(Exception):
            pass

        try:
            with clock.use(lambda: self.base), transaction.atomic():
                probe = start("probe")
                store.execute(probe, ReleaseLease(proof), actor="agent-1")
                due = store.load(probe).watchdog.next_due_at
                raise Probed
        except Probed:
            pass
        return due - self.base

    def copy(self, template: str, first: int, count: int) -> None:
        """``count`` copies of ``template`` (goal row and schedule rows), numbered
        from ``first``: SQLite only (a recursive CTE)."""
        from django.db import connection
        from django_q.models import Schedule

        from ledger.models import Goal

        tid = uuid.UUID(template)
        cols = [f.column for f in Goal._meta.concrete_fields
                if f.column not in ("id", "workspace", "state")]
        # i -> a uuid: 32 hex digits as Django stores them on SQLite; the dashed
        # form for the state's goal_id and the schedule rows.
        hexid = "printf('%%08x', 3405691582) || printf('%%024x', n.i)"
        dashed = ("printf('%%08x', 3405691582) || '-' || substr(printf('%%024x', n.i), 1, 4) "
                  "|| '-' || substr(printf('%%024x', n.i), 5, 4) || '-' || "
                  "substr(printf('%%024x', n.i), 9, 4) || '-' || substr(printf('%%024x', n.i), 13)")
        cte = ("WITH RECURSIVE n(i) AS (SELECT %s UNION ALL SELECT i + 1 FROM n "
               "WHERE i < %s) ")
        with connection.cursor() as cursor:
            cursor.execute(
                cte + f"INSERT INTO ledger_goal (id, workspace, state, {', '.join(cols)}) "
                f"SELECT {hexid}, '/bench/scale/' || n.i, json_set(g.state, '$.goal_id', "
                f"{dashed}, '$.workspace', '/bench/scale/' || n.i), "
                f"{', '.join('g.' + c for c in cols)} FROM n, ledger_goal g WHERE g.id = %s",
                [first, first + count - 1, tid.hex])
            scols = [f.column for f in Schedule._meta.concrete_fields
                     if f.column not in ("id", "name", "args", "next_run")]
            # Next runs spread over the second hour after the claims' due
            # time, a second apart: none due unless a pass makes them so. (The
            # world's due time is minutes from the real clock, django-q2's:
            # the hour's margin outlasts a run at a million goals.)
            cursor.execute(
                cte + f"INSERT INTO django_q_schedule (name, args, next_run, "
                f"{', '.join(scols)}) SELECT replace(s.name, %s, {dashed}), "
                f"replace(s.args, %s, {dashed}), datetime(s.next_run, '+' || (3600 + n.i %% 3600) "
                f"|| ' seconds'), {', '.join('s.' + c for c in scols)} FROM n, django_q_schedule s "
                "WHERE s.name LIKE %s",
                [first, first + count - 1, template, template, f"%{template}"])

    # -- the timed operations

    def op_sweep(self) -> float:
        from ledger.eventstore import clock
        from scheduling.tasks import sweep_leases

        at = self.sweep_first + timedelta(minutes=self.sweeps, seconds=30)
        self.sweeps += 1
        self.now = max(self.now, at)
        with clock.use(lambda: at):
            t0 = time.perf_counter()
            changed = sweep_leases()
            elapsed = time.perf_counter() - t0
        # Each pass expires the next ``due`` leases and blocks the goals the
        # pass before woke and nobody pulled: up to twice ``due`` (and the
        # leased template, in the warm-up), the same at both sizes.
        assert self.due <= changed <= 2 * self.due + 1, (changed, self.due)
        return elapsed

    def op_alerts(self) -> float:
        from ledger.eventstore import clock

        with clock.use(lambda: self.now):
            t0 = time.perf_counter()
            response = self.auditor.get("/api/v1/alerts", HTTP_HOST="localhost")
            elapsed = time.perf_counter() - t0
        body = response.json()
        assert response.status_code == 200 and body["count"] == self.listed \
            and len(body["results"]) == 50, (response.status_code, body.get("count"))
        return elapsed

    def op_dashboard(self) -> float:
        from ledger.eventstore import clock

        with clock.use(lambda: self.now):
            t0 = time.perf_counter()
            response = self.admin.get("/admin/ledger/goal/dashboard/", HTTP_HOST="localhost")
            elapsed = time.perf_counter() - t0
        assert response.status_code == 200, response.status_code
        page = response.content.decode()
        assert f"Blocked: WAKE_RETRIES_EXHAUSTED ({self.listed})" in page \
            and f"Wake rows missing or wrong (ledger doctor --fix) ({self.found})" in page
        return elapsed

    def op_metrics(self) -> float:
        from prometheus_client import generate_latest

        from ledger.eventstore import clock
        from ledger.operators import metrics

        with clock.use(lambda: self.now):
            t0 = time.perf_counter()
            body = generate_latest(metrics.registry())
            elapsed = time.perf_counter() - t0
        assert b"wakeledger" in body
        return elapsed

    def op_claim(self) -> float:
        from ledger.eventstore import clock
        from scheduling.tasks import fire_watchdog

        later = self.due_at + timedelta(minutes=1)
        self.now = max(self.now, later)
        times = []
        with clock.use(lambda: later):
            for _ in range(self.claims_per_round):
                i = self.claim_next
                self.claim_next += 1
                assert i < self.claim_end
                goal_id = str(uuid.UUID(f"{3405691582:08x}{i:024x}"))
                t0 = time.perf_counter()
                outcome = fire_watchdog(goal_id, self.due_str)
                times.append(time.perf_counter() - t0)
                assert outcome == "ready_for_pull", outcome
        return median(times)

    def op_scheduler(self) -> float:
        from django.db import connection, transaction
        from django_q.brokers import get_broker
        from django_q.models import OrmQ, Schedule
        from django_q.scheduler import scheduler

        now = datetime.now(UTC)
        with transaction.atomic():
            ids = list(Schedule.objects.order_by("id").values_list("id", flat=True)
                       [:self.due])
            Schedule.objects.filter(id__in=ids).update(next_run=now - timedelta(minutes=1))
            OrmQ.objects.all().delete()
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        broker = get_broker()
        t0 = time.perf_counter()
        scheduler(broker)
        elapsed = time.perf_counter() - t0
        assert OrmQ.objects.count() == self.due
        return elapsed

    def explain(self, op: str) -> None:
        """Print each query ``op`` runs, its time and SQLite's plan (stderr):
        how a row that is not proportional was diagnosed."""
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as queries:
            getattr(self, f"op_{op}")()
        timed = []
        for query in queries.captured_queries:
            if not query["sql"].lstrip().upper().startswith("SELECT"):
                continue
            with connection.cursor() as cursor:  # again, with its rows fetched
                t0 = time.perf_counter()
                cursor.execute(query["sql"])
                cursor.fetchall()
                timed.append((time.perf_counter() - t0, query["sql"]))
        for seconds, sql in sorted(timed, reverse=True)[:8]:
            print(f"-- {op} {seconds * 1000:.1f} ms: {sql[:300]}", file=sys.stderr)
            with connection.cursor() as cursor:
                cursor.execute("EXPLAIN QUERY PLAN " + sql)
                for plan in cursor.fetchall():
                    print(f"     {plan[-1]}", file=sys.stderr)

    def clients(self) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group
        from django.test import Client
        from rest_framework.test import APIClient

        from ledger.access import accounts

        user, _ = get_user_model().objects.get_or_create(username="auditor-1")
        user.groups.add(Group.objects.get_or_create(name="auditor")[0])
        self.auditor = APIClient()
        self.auditor.credentials(HTTP_AUTHORIZATION=f"Bearer {accounts.issue_token(user)}")
        admin = get_user_model().objects.create_superuser("bench-admin", "", "x")
        self.admin = Client()
        self.admin.force_login(admin)


def worker(args: Any) -> None:
    import logging

    from bench.common import django_setup

    with tempfile.TemporaryDirectory(prefix="wakeledger-bench-scale-") as tmp:
        django_setup(tmp)
        from django.conf import settings

        # No collectstatic here: the admin page links plain static paths.
        settings.STORAGES = {**settings.STORAGES, "staticfiles": {
            "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
        for name in ("scheduling", "ledger", "django-q", "django.request"):
            logging.getLogger(name).setLevel(logging.ERROR)
        world = World(args.goals, args.due, args.listed, args.rounds, args.claims)
        world.clients()
        for op in args.ops:  # warm up: caches, imports, the first sweep's beat
            t0 = time.perf_counter()
            getattr(world, f"op_{op}")()
            print(f"{args.goals:,} goals: warm-up {op} {time.perf_counter() - t0:.2f} s",
                  file=sys.stderr, flush=True)
        print(json.dumps({"ready": world.seconds}), flush=True)
        for line in sys.stdin:
            op = line.strip()
            if not op:
                continue
            if op.startswith("explain "):
                world.explain(op.split()[1])
                print(json.dumps({"seconds": 0}), flush=True)
                continue
            seconds = getattr(world, f"op_{op}")()
            print(json.dumps({"seconds": seconds}), flush=True)


# ---------------------------------------------------------------- the parent

class Worker:
    def __init__(self, goals: int, args: Any, rounds: int):
        command = [sys.executable, __file__, "--worker", "--goals", str(goals),
                   "--ops", *args.ops,
                   "--due", str(args.due), "--listed", str(args.listed),
                   "--rounds", str(rounds), "--claims", str(args.claims)]
        self.goals = goals
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)

    def ready(self) -> float:
        line = self.process.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(f"the {self.goals:,}-goal worker died while seeding")
        return json.loads(line)["ready"]

    def run(self, op: str) -> float:
        self.process.stdin.write(op + "\n")  # type: ignore[union-attr]
        self.process.stdin.flush()  # type: ignore[union-attr]
        line = self.process.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(f"the {self.goals:,}-goal worker died in {op}")
        return json.loads(line)["seconds"]

    def close(self) -> None:
        self.process.stdin.close()  # type: ignore[union-attr]
        self.process.wait(timeout=120)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--small", type=int, default=None, help="goals on the small side")
    p.add_argument("--large", type=int, default=None, help="goals on the large side")
    p.add_argument("--due", type=int, default=100, help="leases/schedules due per pass")
    p.add_argument("--listed", type=int, default=200, help="goals needing a human")
    p.add_argument("--claims", type=int, default=20, help="claims per round")
    p.add_argument("--ops", nargs="*", choices=OPS, default=None,
                   help="rows to measure (default: all)")
    p.add_argument("--worker", action="store_true", help=argparse_hidden())
    p.add_argument("--goals", type=int, default=0, help=argparse_hidden())
    p.add_argument("--rounds", type=int, default=0, help=argparse_hidden())
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    scale = int(os.environ.get("BENCH_SCALE", "1000000"))
    if scale <= 0:
        print("BENCH_SCALE=0: the scale rows are skipped", file=sys.stderr)
        emit([], args.out)
        return
    reps = reps_of(args)
    large = args.large or (20_000 if args.quick else scale)
    small = args.small or large // 10
    args.ops = args.ops or list(OPS)
    workers = [Worker(small, args, reps), Worker(large, args, reps)]
    try:
        seeded = [w.ready() for w in workers]
        print(f"seeded {small:,} and {large:,} goals in {seeded[0]:.0f} s and "
              f"{seeded[1]:.0f} s", file=sys.stderr, flush=True)
        rows = []
        for op in args.ops:
            pairs = []
            for rep in range(reps):
                order = workers if rep % 2 else workers[::-1]
                got = {w.goals: w.run(op) for w in order}
                pairs.append((got[large], got[small]))
            label = LABELS[op].format(due=args.due, listed=args.listed, found=FOUND)
            rows.append(Row(
                name=f"scale sqlite: {label}, {large:,} goals", value=median(
                    [b for b, _ in pairs]) * 1000, unit="ms (less is better)",
                baseline=f"the same at {small:,} goals", baseline_value=median(
                    [s for _, s in pairs]) * 1000,
                ratio=median([b / s for b, s in pairs]), p50_ms=None, p99_ms=None,
                n=args.due if op in ("sweep", "scheduler") else 1, reps=reps))
    finally:
        for w in workers:
            w.close()
    emit(rows, args.out)


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    os.environ.pop("DATABASE_URL", None)
    main()
