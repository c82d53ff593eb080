"""Replay and verify throughput: events folded (and chains checked) per second.

    python bench/replay.py [--goals N] [--events-per-goal M]

Seeds a temporary SQLite database through the store (all commands of a goal in
one transaction), then times `projection.replay` and `projection.verify`.
"""

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goals", type=int, default=200)
    parser.add_argument("--events-per-goal", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wakeledger-bench-") as tmp:
        os.environ["WAKELEDGER_VAR_DIR"] = tmp
        os.environ["DJANGO_SETTINGS_MODULE"] = "ledger.settings"
        os.environ.pop("DATABASE_URL", None)
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import transaction

        from ledger import projection, store
        from ledger.domain import Artifact, LeaseProof, RecordCheckpoint, RunGoal, StartGoal

        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        for g in range(args.goals):
            goal_id = str(uuid.uuid4())
            with transaction.atomic():
                store.start(RunGoal(StartGoal(goal_id=goal_id, workspace=f"/w/{g}",
                                              goal_key="bench", objective="benchmark",
                                              agent="agent-1"), "agent-1", "0" * 64),
                            actor="agent-1")
                for i in range(args.events_per_goal - 1):
                    store.execute(goal_id, RecordCheckpoint(
                        current_step=f"step {i}", progress_pct=min(100, i // 10),
                        completed=(f"step {i - 1}",), next_actions=(f"step {i + 1}",),
                        artifacts=(Artifact(f"out/{i % 20}.txt", "a" * 64, i),) if i < 20 else (),
                        proof=LeaseProof("0" * 64, 1),
                    ), actor="agent-1")
        seeded = time.perf_counter() - started
        total = args.goals * args.events_per_goal
        ids = projection.goal_ids()

        started = time.perf_counter()
        differing = sum(1 for _ in projection.replay(ids))
        replay_s = time.perf_counter() - started
        started = time.perf_counter()
        broken = sum(1 for r in projection.verify(ids) if r.broken)
        verify_s = time.perf_counter() - started
    print(f"{args.goals} goals x {args.events_per_goal} events = {total} events "
          f"(seeded in {seeded:.1f}s)")
    print(f"replay: {total / replay_s:9.0f} events/s  ({replay_s:.2f}s, {differing} differ)")
    print(f"verify: {total / verify_s:9.0f} events/s  ({verify_s:.2f}s, {broken} broken)")


if __name__ == "__main__":
    main()
