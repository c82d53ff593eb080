"""What one /metrics scrape costs at N goals (docs/metrics.md).

    python bench/metrics_scrape.py [--goals 100000]
    python tests/postgres.py python bench/metrics_scrape.py --goals 100000

Migrates a fresh database (a temporary SQLite file, or DATABASE_URL), seeds
N goal rows in one INSERT ... SELECT (5% blocked and needing a human, 10%
active, a few overdue, the rest done) and counts their tallies, then times the collector's queries
(``generate_latest`` of ``ledger.operators.metrics.registry``) and prints
the median of a few scrapes. Not part of `make test` or `make bench`.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def seed(goals: int) -> None:
    from django.db import connection, transaction

    from ledger.eventstore import tallies
    from ledger.models import Goal

    columns = ("id, workspace, goal_key, agent, session_key, workspace_bound, status, reason, "
               "deadline_at, attention, created_at, updated_at, version, last_hash, state")
    # Every 20th goal blocked (needs a human); 2 in 20 running, due in an
    # hour; every 1000th waiting past its deadline (OVERDUE); the rest done.
    # (%% is the driver's escaped modulo.)
    status = ("CASE WHEN i %% 20 = 0 THEN 'blocked' WHEN i %% 20 IN (1, 2) THEN 'running' "
              "WHEN i %% 1000 = 3 THEN 'waiting' ELSE 'done' END")
    reason = "CASE WHEN i %% 20 = 0 THEN 'WAKE_RETRIES_EXHAUSTED' ELSE '' END"
    deadline = ("CASE WHEN i %% 20 IN (1, 2) THEN '2026-12-07 10:00:00+00:00' "
                "WHEN i %% 1000 = 3 THEN '2026-12-01 10:00:00+00:00' ELSE NULL END")
    if connection.vendor == "sqlite":
        source = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s) "
                  f"INSERT INTO {Goal._meta.db_table} ({columns}) SELECT printf('%%032x', i), ")
        deadline = deadline.replace("+00:00", "")
        now = "'2026-12-07 09:00:00'"
        tail = "FROM n"
    else:
        source = (f"INSERT INTO {Goal._meta.db_table} ({columns}) "
                  "SELECT lpad(to_hex(i), 32, '0')::uuid, ")
        deadline = deadline.replace("ELSE NULL", "ELSE NULL::timestamptz") \
            .replace("THEN '2026", "THEN timestamptz '2026")
        now = "timestamptz '2026-12-07 09:00:00+00:00'"
        tail = "FROM generate_series(1, %s) AS n(i)"
    sql = (source + f"'/bench/w' || i, 'g' || i, 'agent-1', '', false, {status}, {reason}, "
           f"{deadline}, {reason}, {now}, {now}, 1, '', '{{}}' {tail}")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [goals])
    # Rows written in SQL, past the store: their goals-by-status tallies
    # (what the scrape reads) counted once, as migration 0017 does.
    tallies.recount()
    # What autovacuum keeps up in production: statistics, and on PostgreSQL
    # the visibility map that lets a count read the index alone.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    options.add_argument("--goals", type=int, default=100_000)
    options.add_argument("--scrapes", type=int, default=7)
    args = options.parse_args()
    scratch = tempfile.TemporaryDirectory()
    os.environ.setdefault("WAKELEDGER_VAR_DIR", scratch.name)
    os.environ.setdefault("SECRET_KEY", "bench-metrics-scrape-" + "x" * 40)
    os.environ["DJANGO_SETTINGS_MODULE"] = "ledger.project.settings"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from prometheus_client import generate_latest

    from ledger.operators import metrics

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    seed(args.goals)
    print(f"{connection.vendor}: seeded {args.goals} goals in "
          f"{time.perf_counter() - started:.1f} s")
    timings, body = [], b""
    for _ in range(args.scrapes):
        started = time.perf_counter()
        body = generate_latest(metrics.registry())
        timings.append(time.perf_counter() - started)
    print(f"scrape: median {statistics.median(timings) * 1000:.1f} ms, "
          f"max {max(timings) * 1000:.1f} ms, {len(body)} bytes")
    scratch.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
