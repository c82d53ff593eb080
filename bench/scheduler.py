"""Due watchdog claims per second, and the cost of one django-q2 scheduler pass.

    python bench/scheduler.py [--quick] [--goals N] [--schedules M]

Claims: N active goals (started with a lease, an internal watchdog prepared,
the lease released: each waits for its wake, with its django-q2 schedule) in a
temporary SQLite database. With the clock moved past their due time, each
round runs ``scheduling.tasks.fire_watchdog`` for a fresh slice of them (what
a cluster worker runs when a watchdog fires: load, claim, outbox). Baseline,
interleaved: ``store.execute`` of one checkpoint per transaction on another
goal, the cost of one plain command.

Scheduler pass: M watchdog schedules of which 1 % are due; one
``django_q.scheduler.scheduler()`` pass (find the due rows, enqueue a task for
each, move each to its next run) against the same pass over M / 10 schedules
with the same due ones. A ratio near 1.0x means the pass costs what is due,
not what exists. Between passes (untimed) the due rows are made due again and
the queued tasks dropped, and SQLite's WAL checkpointed, so that neither
side's timed commit copies the untimed writes into the database.
"""

import logging
import sys
import tempfile
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Row, django_setup, emit, interleaved, parser, percentile_ms, reps_of


def seed_goals(count: int) -> list[str]:
    from django.db import transaction

    from ledger.domain import LeaseProof, RunGoal, StartGoal
    from ledger.domain.commands import ReleaseLease
    from ledger.domain.watchdogs import PrepareWatchdog
    from ledger.eventstore import store

    ids = []
    proof = LeaseProof("0" * 64, 1)
    for start in range(0, count, 500):
        with transaction.atomic():
            for i in range(start, min(count, start + 500)):
                goal_id = str(uuid.uuid4())
                store.start(RunGoal(StartGoal(goal_id=goal_id, workspace=f"/bench/claims/{i}",
                                              goal_key="bench", objective="benchmark",
                                              agent="agent-1"), "agent-1", "0" * 64),
                            actor="agent-1")
                store.execute(goal_id, PrepareWatchdog(proof), actor="agent-1")
                store.execute(goal_id, ReleaseLease(proof), actor="agent-1")
                ids.append(goal_id)
    return ids


def claims(goals: int, per_round: int, reps: int) -> Row:
    from bench.append import Ours
    from ledger.domain.events import iso
    from ledger.eventstore import clock, store
    from scheduling.tasks import fire_watchdog

    logging.getLogger("scheduling").setLevel(logging.WARNING)  # one INFO line per wake
    started = time.perf_counter()
    ids = seed_goals(goals)
    print(f"seeded {goals:,} goals with internal watchdogs in "
          f"{time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
    due = {g: iso(store.load(g).watchdog.next_due_at) for g in ids}
    later = datetime.now(UTC) + timedelta(hours=25)
    pending = iter(ids)
    outcomes: Counter = Counter()
    latencies: list[float] = []

    def run_claims() -> float:
        batch = [next(pending) for _ in range(per_round)]
        with clock.use(lambda: later):
            t0 = time.perf_counter()
            for goal_id in batch:
                s = time.perf_counter()
                outcomes[fire_watchdog(goal_id, due[goal_id])] += 1
                latencies.append(time.perf_counter() - s)
            return per_round / (time.perf_counter() - t0)

    ours = Ours()
    run_claims(), ours.run(per_round)  # warm up
    latencies.clear()
    outcomes.clear()
    value, base, ratio = interleaved(reps, run_claims, lambda: ours.run(per_round))
    print(f"claim outcomes: {dict(outcomes)}", file=sys.stderr)
    assert outcomes.get("ready_for_pull", 0) == per_round * reps, outcomes
    return Row(name=f"claims: due internal watchdog claims, {goals:,} active goals",
               value=value, unit="claims/s",
               baseline="store.execute, 1 checkpoint per transaction",
               baseline_value=base, ratio=ratio, p50_ms=percentile_ms(latencies, 50),
               p99_ms=percentile_ms(latencies, 99), n=per_round, reps=reps)


def scheduler_pass(total: int, reps: int) -> Row:
    from django.db import connection, transaction
    from django_q.brokers import get_broker
    from django_q.models import OrmQ, Schedule
    from django_q.scheduler import scheduler

    from scheduling.watchdogs import FIRE

    # django-q2 logs two INFO lines per task it enqueues; the pass is timed
    # without them (a deployment's log handler decides what they cost).
    logging.getLogger("django-q").setLevel(logging.WARNING)

    due_count = total // 100
    now = datetime.now(UTC)
    small = total // 10

    def make(count: int, first: int) -> list[Schedule]:
        return [Schedule(name=f"wakeledger-watchdog-bench-{first + i}", func=FIRE,
                         args=repr(str(uuid.uuid4())), schedule_type=Schedule.MINUTES,
                         minutes=60, repeats=-1, intended_date_kwarg="intended_date",
                         next_run=now + timedelta(minutes=30 + (first + i) % 30))
                for i in range(count)]

    Schedule.objects.all().delete()  # the claims' own and the sweeper
    Schedule.objects.bulk_create(make(small, 0), batch_size=2000)
    due_ids = list(Schedule.objects.order_by("id").values_list("id", flat=True)[:due_count])
    broker = get_broker()

    def make_due() -> None:
        with transaction.atomic():
            Schedule.objects.filter(id__in=due_ids).update(next_run=now - timedelta(minutes=1))
            OrmQ.objects.all().delete()
        # The untimed writes (this reset, and before a big pass the 90 % of
        # the rows just inserted, before a small one just deleted) would
        # otherwise be copied from the WAL into the database by the automatic
        # checkpoint at the timed pass's commit: the pass would pay for the
        # resize, more on the side that follows the bigger write.
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def one_pass() -> float:
        make_due()
        t0 = time.perf_counter()
        scheduler(broker)
        elapsed = time.perf_counter() - t0
        queued = OrmQ.objects.count()
        assert queued == due_count, (queued, due_count)
        return elapsed * 1000

    state = {"big": False}

    def at(big: bool) -> None:
        if big and not state["big"]:
            Schedule.objects.bulk_create(make(total - small, small), batch_size=2000)
        elif not big and state["big"]:
            Schedule.objects.filter(name__in=[f"wakeledger-watchdog-bench-{i}"
                                              for i in range(small, total)]).delete()
        state["big"] = big

    def big_pass() -> float:
        at(True)
        return one_pass()

    def small_pass() -> float:
        at(False)
        return one_pass()

    big_pass(), small_pass()  # warm up
    value, base, ratio = interleaved(reps, big_pass, small_pass)
    return Row(name=f"scheduler: one django-q2 pass, {total:,} watchdog schedules, "
                    f"{due_count:,} due",
               value=value, unit="ms per pass",
               baseline=f"same pass, {small:,} schedules, same {due_count:,} due",
               baseline_value=base, ratio=ratio, p50_ms=None, p99_ms=None,
               n=due_count, reps=reps)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--goals", type=int, default=None, help="active goals with watchdogs")
    p.add_argument("--schedules", type=int, default=None, help="watchdog schedules")
    args = p.parse_args()
    reps = reps_of(args)
    goals = args.goals or (1_000 if args.quick else 10_000)
    schedules = args.schedules or (20_000 if args.quick else 100_000)
    per_round = min(200 if args.quick else 400, goals // (reps + 1))
    with tempfile.TemporaryDirectory(prefix="wakeledger-bench-") as tmp:
        django_setup(tmp)
        rows = [claims(goals, per_round, reps), scheduler_pass(schedules, reps)]
    emit(rows, args.out)


if __name__ == "__main__":
    main()
